"""The fake model API on its own: the script's matching (pure), the streams and errors it
renders for each API, what its log reads from a request, and the HTTP server (streams,
delays, cut streams, held streams, the request log, the command line). The real CLIs against
it: tests/agent_clis."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from fakes.model_api import (
    ApiError,
    FakeModelApi,
    ReadFile,
    RecordedRequest,
    Script,
    Shell,
    ToolCall,
    WriteFile,
    after_tool_result,
    anthropic,
    carries,
    openai,
    overloaded,
    rate_limited,
    text,
    tools,
    usage_limit,
)
from fakes.model_api.script import EXHAUSTED_TEXT
from fakes.model_api.script_file import parse_script
from tests.waits import CAP

REPO = Path(__file__).resolve().parents[2]


def request(api: str = "anthropic", number: int = 1, **body: Any) -> RecordedRequest:
    return RecordedRequest(
        number=number,
        api=api,  # type: ignore[arg-type]
        method="POST",
        path="/v1/messages" if api == "anthropic" else "/v1/responses",
        query="",
        headers={"x-claude-code-session-id": "s-1", "session-id": "t-1"},
        body=body,
        received_at=0.0,
        received_at_epoch=0.0,
    )


CLAUDE_AFTER_TOOL = {
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "do it"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash"}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "6 notes"}],
        },
    ]
}
CODEX_AFTER_TOOL = {
    "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "do it"}]},
        {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "aborted"},
    ]
}


# --- the script (pure) ---


def test_turns_are_used_in_order_and_times_repeats_one() -> None:
    script = Script([overloaded(times=2), text("done")])
    chosen = [script.choose(request(number=n)).index for n in (1, 2, 3, 4)]
    assert chosen == [0, 0, 1, None]
    assert script.unmatched == [4] and script.done


def test_a_turn_with_a_predicate_waits_in_its_place() -> None:
    script = Script([text("answer", when=after_tool_result), tools(Shell("ls"))])
    assert script.choose(request()).index == 1  # not a tool result: the next turn answers
    assert script.choose(request(**CLAUDE_AFTER_TOOL)).index == 0
    assert script.pending == 0


def test_an_exhausted_script_answers_that_it_is() -> None:
    script = Script([])
    choice = script.choose(request())
    assert choice.index is None and choice.turn.text == EXHAUSTED_TEXT  # type: ignore[union-attr]
    assert script.unmatched == [1]


def test_turns_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        tools()
    with pytest.raises(ValueError):
        text("x", times=0)
    with pytest.raises(ValueError):
        ApiError(status=200, code="ok")
    with pytest.raises(ValueError):
        usage_limit(0, window="daily")


# --- what the log reads from a request ---


def test_tool_results_of_both_apis() -> None:
    claude = request("anthropic", **CLAUDE_AFTER_TOOL)
    codex = request("openai", **CODEX_AFTER_TOOL)
    assert claude.session_id == "s-1" and codex.session_id == "t-1"
    assert [(r.call_id, r.output) for r in claude.last_tool_results()] == [("toolu_1", "6 notes")]
    assert [(r.call_id, r.output) for r in codex.last_tool_results()] == [("call_1", "aborted")]
    assert codex.result_for("call_1") is not None and codex.result_for("call_2") is None
    assert carries("6 notes")(claude) and carries("do it")(codex) and not carries("zz")(codex)
    assert request("anthropic").last_tool_results() == []


# --- rendering ---


def _events(reply_events: tuple[bytes, ...] | None) -> list[dict[str, Any]]:
    assert reply_events is not None
    events = []
    for raw in reply_events:
        name, data = raw.decode().strip().split("\n")
        assert name.startswith("event: ") and data.startswith("data: ")
        events.append(json.loads(data[6:]) | {"_event": name[7:]})
        assert events[-1]["type"] == events[-1]["_event"]
    return events


def test_anthropic_tool_calls_stream() -> None:
    turn = tools(Shell("ls"), WriteFile("/w/a.txt", "hi\n"), text="Working.")
    reply = anthropic.render(turn, 7, "claude-x", 0)
    events = _events(reply.events)
    assert [e["type"] for e in events] == (
        ["message_start"]
        + ["content_block_start", "content_block_delta", "content_block_stop"] * 3
        + ["message_delta", "message_stop"]
    )
    assert events[0]["message"]["model"] == "claude-x" and "usage" in events[0]["message"]
    assert events[1]["content_block"]["type"] == "text"
    assert events[4]["content_block"] == {
        "type": "tool_use",
        "id": "toolu_fake_0007_0",
        "name": "Bash",
        "input": {},
    }
    assert json.loads(events[8]["delta"]["partial_json"]) == {
        "file_path": "/w/a.txt",
        "content": "hi\n",
    }
    assert events[-2]["delta"]["stop_reason"] == "tool_use"
    assert reply.call_ids == ("toolu_fake_0007_0", "toolu_fake_0007_1")
    assert reply.headers["content-type"] == "text/event-stream"


def test_anthropic_errors_and_usage_limit() -> None:
    error = anthropic.render(overloaded(), 1, "", 0)
    assert error.status == 529 and not error.streamed
    assert json.loads(error.body) == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
    assert anthropic.render(rate_limited(3), 1, "", 0).headers["retry-after"] == "3"
    limit = anthropic.render(usage_limit(1_800_000_000), 1, "", 0)
    assert limit.status == 429
    assert limit.headers["anthropic-ratelimit-unified-status"] == "rejected"
    assert limit.headers["anthropic-ratelimit-unified-reset"] == "1800000000"
    assert limit.headers["anthropic-ratelimit-unified-representative-claim"] == "five_hour"
    assert json.loads(limit.body)["error"]["type"] == "rate_limit_error"


def test_openai_items_and_usage_limit() -> None:
    turn = tools(Shell("ls"), WriteFile("a.txt", "one\ntwo\n"), ReadFile("a.txt"))
    reply = openai.render(turn, 3, "gpt-x", 1000)
    events = _events(reply.events)
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done[0] == {
        "type": "function_call",
        "id": "fc_call_fake_0003_0",
        "call_id": "call_fake_0003_0",
        "name": "exec_command",
        "arguments": json.dumps({"cmd": "ls"}),
        "status": "completed",
    }
    assert done[1]["type"] == "custom_tool_call" and done[1]["name"] == "apply_patch"
    assert done[1]["input"] == "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** End Patch"
    assert json.loads(done[2]["arguments"]) == {"cmd": 'cat "a.txt"'}
    assert events[-1]["response"]["usage"]["total_tokens"] == 120
    assert [e["sequence_number"] for e in events] == list(range(1, len(events) + 1))

    final = _events(openai.render(text("bye"), 4, "", 0).events)
    assert final[1]["item"]["content"] == [
        {"type": "output_text", "text": "bye", "annotations": []}
    ]

    limit = openai.render(usage_limit(1600, window="seven_day"), 5, "", 1000)
    body = json.loads(limit.body)["error"]
    assert limit.status == 429 and body["type"] == "usage_limit_reached"
    assert body["resets_at"] == 1600 and body["resets_in_seconds"] == 600
    assert limit.headers["x-codex-secondary-reset-at"] == "1600"
    assert limit.headers["x-codex-secondary-window-minutes"] == "10080"


def test_a_raw_tool_call_is_passed_as_written() -> None:
    reply = anthropic.render(tools(ToolCall("mcp__x__ask", {"q": 1})), 1, "", 0)
    assert b'"name":"mcp__x__ask"' in b"".join(reply.events or ())


# --- the script file ---


def test_a_json_script() -> None:
    script = parse_script(
        {
            "turns": [
                {"tools": [{"shell": "ls"}, {"write": {"path": "a", "content": "b"}}], "text": "t"},
                {"overloaded": True, "times": 2, "delay_seconds": 0.5},
                {"rate_limited": {"retry_after": 1}, "label": "slow down"},
                {"usage_limit": {"resets_in_seconds": 60}},
                {"error": {"status": 400, "code": "invalid_request_error", "message": "no"}},
                {"text": "done", "when": "after_tool_result", "cut_after": 2, "hold_open": True},
            ]
        },
        now=1000,
    )
    kinds = [type(turn).__name__ for turn in script.turns]
    assert kinds == ["ToolCalls", "ApiError", "ApiError", "UsageLimit", "ApiError", "Text"]
    assert script.pending == 7 and script.turns[3].resets_at == 1060  # type: ignore[union-attr]
    assert script.turns[5].when is after_tool_result and script.turns[2].label == "slow down"
    for bad in (
        [{"text": "a", "error": {}}],
        [{"text": "a", "colour": 1}],
        [{"tools": [{"x": 1}]}],
    ):
        with pytest.raises(ValueError):
            parse_script(bad)


# --- the server ---


def post(
    fake: FakeModelApi, path: str, body: dict[str, Any], **headers: str
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=CAP)
    try:
        connection.request(
            "POST", path, json.dumps(body), {"content-type": "application/json"} | headers
        )
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_the_server_streams_logs_and_errs() -> None:
    with FakeModelApi([tools(Shell("ls")), overloaded(), text("done")]) as fake:
        status, headers, body = post(
            fake,
            "/v1/messages?beta=true",
            {"model": "m", "messages": []},
            **{"X-Claude-Code-Session-Id": "abc"},
        )
        assert status == 200 and headers["transfer-encoding"] == "chunked"
        assert body.count(b"event: ") == 6 and b"toolu_fake_0001_0" in body
        status, _, body = post(fake, "/v1/messages", CLAUDE_AFTER_TOOL)
        assert status == 529 and b"overloaded_error" in body
        status, _, body = post(
            fake, "/v1/responses", {"input": [], "model": "g"}, **{"session-id": "t"}
        )
        assert status == 200 and b"response.completed" in body
        assert post(fake, "/v1/models", {})[0] == 404
        assert fake.unrouted == ["POST /v1/models"]

        log = fake.requests()
        assert [(r.api, r.turn_index, r.status) for r in log] == [
            ("anthropic", 0, 200),
            ("anthropic", 1, 529),
            ("openai", 2, 200),
        ]
        assert log[0].query == "beta=true" and log[0].call_ids == ("toolu_fake_0001_0",)
        assert log[1].last_tool_results()[0].output == "6 notes"
        assert fake.session_ids() == ["abc", "", "t"] and fake.script.done


def test_a_delay_and_a_cut_stream() -> None:
    with FakeModelApi([text("slow", delay_seconds=0.3), text("cut", cut_after=2)]) as fake:
        started = time.monotonic()
        assert post(fake, "/v1/messages", {})[0] == 200
        assert time.monotonic() - started >= 0.3
        with pytest.raises(http.client.IncompleteRead) as cut:
            post(fake, "/v1/messages", {})
        assert cut.value.partial.count(b"event: ") == 2
        assert fake.wait_for_answers(2)[1].status == 200


def test_a_held_stream_stalls_no_other_client_and_ends_on_close() -> None:
    fake = FakeModelApi([text("held", cut_after=1, hold_open=True), text("other")]).start()
    outcome: list[BaseException | None] = []

    def held() -> None:
        try:
            post(fake, "/v1/messages", {})
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome.append(error)

    thread = threading.Thread(target=held)
    thread.start()
    fake.wait_for_requests(1)
    assert post(fake, "/v1/messages", {})[0] == 200  # served while the first is held
    fake.close()
    thread.join(timeout=2 * CAP)  # a cap: the held client gives up by itself after CAP
    # Cut off by the close: a stream left held would end in the client's own timeout instead.
    assert isinstance(outcome[0], http.client.IncompleteRead), outcome


def test_a_request_is_in_the_log_file_before_its_answer_ends(tmp_path: Path) -> None:
    # A CLI runs the tool an answer names as soon as it has read it: whoever then looks at
    # the log file must find that request (the agent demo counts them to name the killed call).
    log_file = tmp_path / "requests.log"
    fake = FakeModelApi([tools(Shell("ls"), hold_open=True, cut_after=6)], log_file=log_file)
    fake.start()
    thread = threading.Thread(target=lambda: _swallow(lambda: post(fake, "/v1/messages", {})))
    thread.start()
    try:
        fake.wait_for_requests(1)
        deadline = time.monotonic() + CAP
        while not log_file.read_text(encoding="utf-8") and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = [json.loads(line) for line in log_file.read_text(encoding="utf-8").splitlines()]
        assert [(line["number"], line["call_ids"]) for line in lines] == [
            (1, ["toolu_fake_0001_0"])
        ]
        assert thread.is_alive()  # the answer is still being held open
    finally:
        fake.close()
        thread.join(timeout=CAP)


def _swallow(call: Any) -> None:
    try:
        call()
    except (http.client.IncompleteRead, ConnectionError):
        pass


def test_wait_for_times_out_saying_what_it_saw() -> None:
    with FakeModelApi([]) as fake, pytest.raises(TimeoutError, match="saw 0 requests"):
        fake.wait_for_requests(1, timeout=0.2)


def test_the_command_line_serves_a_script_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "from the file"}]))
    log = tmp_path / "requests.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "fakes.model_api", "--script", str(script), "--log", str(log)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "ANTHROPIC_BASE_URL=http://127.0.0.1:" in line and "1 answers scripted" in line
        port = int(line.split("ANTHROPIC_BASE_URL=http://127.0.0.1:")[1].split()[0])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CAP)
        connection.request("POST", "/v1/messages", json.dumps({"messages": []}))
        assert b"from the file" in connection.getresponse().read()
        connection.close()
    finally:
        process.terminate()
        assert process.wait(timeout=CAP) == 0
        if process.stdout is not None:
            process.stdout.close()
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert logged[0]["turn_index"] == 0 and logged[0]["body"] == {"messages": []}


def test_a_bad_script_file_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text('{"turns": [{"nothing": 1}]}')
    done = subprocess.run(
        [sys.executable, "-m", "fakes.model_api", "--script", str(script)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=CAP,
    )
    assert done.returncode == 2 and "bad script" in done.stderr
