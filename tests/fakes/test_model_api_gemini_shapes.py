"""The fake's Gemini API on its own: the answers it renders (streamed, whole, errors, the
daily quota), what its log reads from a Gemini request, and its routes. The real Gemini CLI
against it: test_model_api_gemini.py."""

from __future__ import annotations

import json
from typing import Any

from fakes.model_api import (
    ApiError,
    FakeModelApi,
    McpTool,
    ReadFile,
    RecordedRequest,
    Shell,
    WriteFile,
    after_tool_result,
    carries,
    gemini,
    rate_limited,
    session,
    text,
    tools,
    usage_limit,
)
from fakes.model_api.routes import route
from tests.fakes.test_model_api import post

PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
AFTER_TOOL = {
    "contents": [
        {"role": "user", "parts": [{"text": "<session_context/>"}, {"text": "do it"}]},
        {
            "role": "model",
            "parts": [{"functionCall": {"id": "call_1", "name": "run_shell_command", "args": {}}}],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "call_1",
                        "name": "run_shell_command",
                        "response": {"output": "Output: 6 notes"},
                    }
                },
                {
                    "functionResponse": {
                        "id": "call_2",
                        "name": "read_file",
                        "response": {"error": "no such file"},
                    }
                },
            ],
        },
    ],
    "tools": [{"functionDeclarations": [{"name": "run_shell_command"}, {"name": "read_file"}]}],
}


def request(body: dict[str, Any], path: str = PATH) -> RecordedRequest:
    return RecordedRequest(
        number=1,
        api="gemini",
        method="POST",
        path=path,
        query="alt=sse",
        headers={"x-overnight-session-id": "s-1", "session-id": "not-this"},
        body=body,
        received_at=0.0,
        received_at_epoch=0.0,
    )


def chunks(events: tuple[bytes, ...] | None) -> list[dict[str, Any]]:
    assert events is not None
    found = []
    for raw in events:
        assert raw.startswith(b"data: ") and raw.endswith(b"\r\n\r\n")
        found.append(json.loads(raw[6:]))
    return found


# --- rendering ---


def test_a_stream_is_a_chunk_per_part_the_last_finishing_with_the_usage() -> None:
    turn = tools(
        Shell("ls"),
        WriteFile("/w/a.txt", "hi\n"),
        ReadFile("/w/a.txt"),
        McpTool("files", "ask", {"q": 1}),
        text="Working.",
        cache_read_tokens=30,
    )
    reply = gemini.render(turn, 7, "gemini-2.5-flash", 0)
    found = chunks(reply.events)
    parts = [chunk["candidates"][0]["content"]["parts"] for chunk in found]
    assert parts[0] == [{"text": "Working."}]
    calls = [part[0]["functionCall"] for part in parts[1:]]
    assert calls == [
        {
            "id": "call_fake_0007_0",
            "name": "run_shell_command",
            "args": {"command": "ls", "description": "run a command"},
        },
        {
            "id": "call_fake_0007_1",
            "name": "write_file",
            "args": {"file_path": "/w/a.txt", "content": "hi\n"},
        },
        {"id": "call_fake_0007_2", "name": "read_file", "args": {"file_path": "/w/a.txt"}},
        {"id": "call_fake_0007_3", "name": "mcp_files_ask", "args": {"q": 1}},
    ]
    assert [c["candidates"][0].get("finishReason") for c in found] == [None] * 4 + ["STOP"]
    assert all(c["candidates"][0]["content"]["role"] == "model" for c in found)
    assert ["usageMetadata" in chunk for chunk in found] == [False] * 4 + [True]
    assert found[-1]["usageMetadata"] == {
        "promptTokenCount": 130,
        "candidatesTokenCount": 20,
        "totalTokenCount": 150,
        "cachedContentTokenCount": 30,
    }
    assert {(c["modelVersion"], c["responseId"]) for c in found} == {
        ("gemini-2.5-flash", "resp_fake_0007")
    }
    assert reply.call_ids == tuple(f"call_fake_0007_{n}" for n in range(4))
    assert reply.headers["content-type"] == "text/event-stream"


def test_a_whole_answer_and_a_stream_without_sse() -> None:
    whole = gemini.render(tools(Shell("ls"), text="Hm."), 2, "m", 0, streamed=False)
    assert not whole.streamed and whole.headers["content-type"] == "application/json"
    body = json.loads(whole.body)
    assert [list(part) for part in body["candidates"][0]["content"]["parts"]] == [
        ["text"],
        ["functionCall"],
    ]
    assert body["candidates"][0]["finishReason"] == "STOP"
    assert body["usageMetadata"]["totalTokenCount"] == 120
    assert "cachedContentTokenCount" not in body["usageMetadata"]  # the API leaves out zeros
    array = json.loads(gemini.render(text("bye"), 3, "m", 0, sse=False).body)
    assert [c["candidates"][0]["content"]["parts"] for c in array] == [[{"text": "bye"}]]
    empty = chunks(gemini.render(text(""), 4, "m", 0).events)
    assert empty[0]["candidates"][0]["content"]["parts"] == [{"text": ""}]


def test_errors_say_the_grpc_status() -> None:
    unavailable = gemini.render(ApiError(status=503, code="UNAVAILABLE", message="busy"), 1, "", 0)
    assert unavailable.status == 503 and not unavailable.streamed
    assert json.loads(unavailable.body) == {
        "error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}
    }
    limited = json.loads(gemini.render(rate_limited(2), 1, "", 0).body)["error"]
    assert (limited["code"], limited["status"]) == (429, "RESOURCE_EXHAUSTED")
    assert limited["details"] == [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2s"}
    ]
    assert "details" not in json.loads(gemini.render(rate_limited(), 1, "", 0).body)["error"]
    internal = gemini.render(ApiError(status=500, code="api_error", message="x"), 1, "", 0)
    assert json.loads(internal.body)["error"]["status"] == "INTERNAL"


def test_a_usage_limit_is_the_daily_quota_spent() -> None:
    reply = gemini.render(usage_limit(1600), 1, "gemini-2.5-flash", 1000)
    error = json.loads(reply.body)["error"]
    assert reply.status == 429 and error["status"] == "RESOURCE_EXHAUSTED"
    failure, retry = error["details"]
    assert failure["@type"] == "type.googleapis.com/google.rpc.QuotaFailure"
    assert "PerDay" in failure["violations"][0]["quotaId"]
    assert failure["violations"][0]["quotaDimensions"]["model"] == "gemini-2.5-flash"
    assert retry == {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "600s"}
    assert error["message"].endswith("Please retry in 600s.")


# --- what the log reads ---


def test_a_gemini_request_is_read_like_the_others() -> None:
    recorded = request(AFTER_TOOL)
    assert recorded.session_id == "s-1" and session("s-1")(recorded)
    assert recorded.model == "gemini-2.5-flash"
    assert recorded.tool_names == ["run_shell_command", "read_file"]
    assert [(r.call_id, r.output, r.is_error) for r in recorded.last_tool_results()] == [
        ("call_1", "Output: 6 notes", False),
        ("call_2", "no such file", True),
    ]
    assert recorded.result_for("call_2") is not None and after_tool_result(recorded)
    assert carries("6 notes")(recorded) and carries("do it")(recorded)
    assert not carries("zz")(recorded)
    first = request({"contents": AFTER_TOOL["contents"][:1]}, "/v1beta/models/m:generateContent")
    assert first.model == "m" and first.last_tool_results() == [] and first.tool_results() == []
    assert not after_tool_result(first)


def test_the_routes() -> None:
    assert route(PATH + "?alt=sse") == "gemini"
    assert route("/v1beta/models/gemini-2.5-pro:generateContent") == "gemini"
    assert route("/v1beta/models/m:countTokens") is None
    assert route("/v1beta/models/:generateContent") is None
    assert route("/v1/messages?beta=true") == "anthropic"


# --- the server ---


def test_the_server_answers_each_method_as_asked() -> None:
    with FakeModelApi([tools(Shell("ls")), text("whole"), text("array")]) as fake:
        assert fake.gemini_base_url == fake.url
        status, headers, body = post(fake, PATH + "?alt=sse", {"contents": []})
        assert status == 200 and headers["content-type"] == "text/event-stream"
        assert body.count(b"data: ") == 1 and b"run_shell_command" in body
        status, headers, body = post(
            fake, "/v1beta/models/gemini-2.5-flash:generateContent", AFTER_TOOL
        )
        assert status == 200 and json.loads(body)["candidates"][0]["finishReason"] == "STOP"
        status, _, body = post(fake, PATH, {"contents": []})
        assert status == 200 and isinstance(json.loads(body), list)
        assert post(fake, "/v1beta/models/gemini-2.5-flash:countTokens", {})[0] == 404
        log = fake.requests("gemini")
        assert [(r.model, r.label, r.status) for r in log] == [("gemini-2.5-flash", "", 200)] * 3
        assert log[0].call_ids == ("call_fake_0001_0",) and log[1].last_tool_results()
        assert fake.unrouted == ["POST /v1beta/models/gemini-2.5-flash:countTokens"]
