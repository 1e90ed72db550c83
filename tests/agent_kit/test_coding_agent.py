"""The coding-agent adapter's parts, without a real CLI (tests/agent_clis runs the real ones):
its modules are the kit's kind (Python 3.8, standard library), a config it cannot run is one
line and exit 2, a scripted stand-in CLI drives the ways out it rarely meets for real (a usage
limit with no reset time, a CLI that keeps failing, a line too long to hold), the MCP server
speaks JSON-RPC over stdio and relays its calls, and the spend and limit arithmetic."""

from __future__ import annotations

import ast
import datetime
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Queue
from typing import Any

import pytest

from overnight.core.agent_kinds import AGENT_CLIS
from tests.waits import CAP

KIT = Path(__file__).resolve().parents[2] / "overnight" / "agent_kit"
sys.path.insert(0, str(KIT))  # as in the sandbox: the adapter's modules are the kit's siblings

import clis  # noqa: E402
import coding_agent_mcp as mcp  # noqa: E402
import coding_agent_system as system  # noqa: E402
from clis.claude_code import cli as claude_cli  # noqa: E402
from clis.claude_code.spend import ClaudeSpend  # noqa: E402
from clis.codex.spend import CodexSpend  # noqa: E402
from coding_agent_session import DONE_CHECK_LEAD  # noqa: E402

# The adapter's modules, as paths in the kit: its own and every kind's.
MODULES = sorted(p.stem for p in KIT.glob("coding_agent*.py"))
MODULES += sorted(str(p.relative_to(KIT))[:-3] for p in (KIT / "clis").rglob("*.py"))
KIT_MODULES = {p.stem for p in KIT.glob("overnight_agent*.py")}
SIBLINGS = {*KIT_MODULES, "clis", *MODULES}
STDLIB = set(sys.stdlib_module_names)


@pytest.mark.parametrize("name", MODULES)
def test_the_adapter_is_python_3_8_and_standard_library_only(name: str) -> None:
    tree = ast.parse((KIT / f"{name}.py").read_text(), feature_version=(3, 8))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []  # what only the type checker reads
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= STDLIB | SIBLINGS | {"overnight"}, imported - STDLIB - SIBLINGS
    for node in ast.walk(tree):  # 3.9+ at run time: str.removeprefix, dict | dict, ...
        if isinstance(node, ast.Attribute):
            assert node.attr not in ("removeprefix", "removesuffix"), name


# --- a stand-in CLI -------------------------------------------------------------------------

FAKE_CLI = r'''#!PYTHON
"""A stand-in for Claude Code: each start plays the next entry of SCRIPT (a JSON list of
lists of actions), and appends its argv to CALLS."""
import json, os, sys, time
script = json.load(open(os.environ["FAKE_SCRIPT"]))
calls = os.environ["FAKE_CALLS"]
number = sum(1 for _ in open(calls)) if os.path.exists(calls) else 0
with open(calls, "a") as out:
    out.write(json.dumps(sys.argv[1:]) + "\n")
argv = sys.argv[1:]
flag = "--session-id" if "--session-id" in argv else "--resume"
session = argv[argv.index(flag) + 1]
prompt = sys.stdin.read()
if os.environ.get("FAKE_PROMPTS"):
    with open(os.environ["FAKE_PROMPTS"], "a") as out:
        out.write(json.dumps(prompt) + "\n")
import re
projects = os.path.join(os.environ["HOME"], ".claude", "projects")
folder = os.path.join(projects, re.sub("[^A-Za-z0-9]", "-", os.getcwd()))
os.makedirs(folder, exist_ok=True)
transcript_path = os.path.join(folder, session + ".jsonl")
with open(transcript_path, "a") as transcript:
    transcript.write(json.dumps({"type": "user", "n": number}) + "\n")
def say(value):
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()
say({"type": "system", "subtype": "init", "session_id": session})
for action in script[min(number, len(script) - 1)]:
    kind, value = action
    if kind == "tool":
        call = {"type": "tool_use", "id": value, "name": "Bash", "input": {"command": value}}
        say({"type": "assistant", "message": {"id": "m" + value, "model": "claude-test",
             "usage": {"input_tokens": 100, "output_tokens": 1}, "content": [call]}})
        result = {"type": "tool_result", "tool_use_id": value}
        say({"type": "user", "message": {"content": [result]}})
    elif kind == "start":  # a tool call begun, its result said by "finish"
        call = {"type": "tool_use", "id": value, "name": "Bash", "input": {"command": value}}
        say({"type": "assistant", "message": {"id": "m" + value, "model": "claude-test",
             "usage": {"input_tokens": 100, "output_tokens": 1}, "content": [call]}})
    elif kind == "finish":
        result = {"type": "tool_result", "tool_use_id": value}
        say({"type": "user", "message": {"content": [result]}})
    elif kind == "append":  # the transcript written late, as Claude Code does
        with open(transcript_path, "a") as transcript:
            transcript.write(json.dumps({"type": "assistant", "late": value}) + "\n")
    elif kind == "sleep":
        time.sleep(value)
    elif kind == "hold":  # mid-call until the test makes the file `value` (capped)
        give_up = time.monotonic() + 600
        while not os.path.exists(value) and time.monotonic() < give_up:
            time.sleep(0.05)
    elif kind == "raw":
        sys.stdout.write(value)
        sys.stdout.flush()
    elif kind == "result":
        say(dict({"type": "result", "session_id": session}, **value))
    elif kind == "exit":
        sys.exit(value)
'''


def _adapter(
    tmp_path: Path, script: list[Any], env_extra: dict[str, str] | None = None, **config: Any
) -> tuple[int, str, Path]:
    cli = tmp_path / "fake-claude"
    cli.write_text(FAKE_CLI.replace("PYTHON", sys.executable))
    cli.chmod(0o755)
    (tmp_path / "script.json").write_text(json.dumps(script))
    app = tmp_path / "app"
    app.mkdir(exist_ok=True)
    values = {
        "kind": "claude-code",
        "prompt": "Do it.",
        "cli": str(cli),
        "cwd": str(app),
        "checkpoint_path": str(tmp_path / "checkpoint.json"),
        "usage_backoff_seconds": 0.5,
        "api_backoff_seconds": [0.1],
    } | config
    (tmp_path / "state").mkdir(exist_ok=True)
    path = tmp_path / "state" / "coding-agent.json"
    path.write_text(json.dumps(values))
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "PYTHONPATH": str(KIT),
        "OVERNIGHT_CHECKPOINT": str(tmp_path / "checkpoint.json"),
        "OVERNIGHT_ANSWERS_DIR": str(tmp_path / "answers"),
        "FAKE_SCRIPT": str(tmp_path / "script.json"),
        "FAKE_CALLS": str(tmp_path / "calls.jsonl"),
        "FAKE_PROMPTS": str(tmp_path / "prompts.jsonl"),
        **(env_extra or {}),
    }
    done = subprocess.run(
        [sys.executable, str(KIT / "coding_agent.py"), "--config", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=2 * CAP,  # a cap: a script may hold its call open until the test lets it go
    )
    return done.returncode, done.stdout + done.stderr, tmp_path


def _calls(tmp_path: Path) -> list[list[str]]:
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


def _checkpoint(tmp_path: Path) -> dict[str, Any]:
    return dict(json.loads((tmp_path / "checkpoint.json").read_text()))


SUCCESS = ["result", {"subtype": "success", "is_error": False, "result": "ok"}]


def test_a_config_it_cannot_run_is_one_line_and_exit_2(tmp_path: Path) -> None:
    code, out, _ = _adapter(tmp_path, [[SUCCESS]], kind="aider")
    assert code == 2 and out.strip().splitlines() == [
        f"coding-agent: kind must be one of {', '.join(AGENT_CLIS)}, not 'aider'"
    ]
    code, out, _ = _adapter(tmp_path, [[SUCCESS]], cli="/nowhere/claude")
    assert code == 2 and "not an executable at '/nowhere/claude'" in out


def test_a_failed_done_check_is_the_resumed_sessions_next_prompt(tmp_path: Path) -> None:
    code, out, _ = _adapter(tmp_path, [[["tool", "one"], SUCCESS], [SUCCESS]])
    assert code == 0, out
    told = tmp_path / "done-check.txt"
    told.write_text("command: pytest -q\nresult: exit 1\n\noutput:\nFAILED test_due_dates\n")
    again = {
        "OVERNIGHT_RESTART_REASON": "done check failed: `pytest -q` (exit 1)",
        "OVERNIGHT_DONE_CHECK_FILE": str(told),
    }
    code, out, _ = _adapter(tmp_path, [[["tool", "one"], SUCCESS], [SUCCESS]], again)
    assert code == 0, out
    calls = _calls(tmp_path)
    session = calls[0][calls[0].index("--session-id") + 1]
    assert calls[1][:2] == ["--resume", session]  # the same session, told what failed
    prompts = [json.loads(line) for line in (tmp_path / "prompts.jsonl").read_text().splitlines()]
    assert prompts[0] == "Do it."
    assert prompts[1] == f"{DONE_CHECK_LEAD}\n\n{told.read_text().strip()}"
    assert "end your turn again" in prompts[1] and "exit 0" not in prompts[1]
    notes = _checkpoint(tmp_path)["notes"]
    assert "done check failed: `pytest -q` (exit 1): told the CLI" in notes


def test_a_done_check_file_left_from_before_is_not_a_later_starts_prompt(tmp_path: Path) -> None:
    told = tmp_path / "done-check.txt"
    told.write_text("command: pytest -q\nresult: exit 1\n")
    again = {
        "OVERNIGHT_RESTART_REASON": "context window full: fresh start",
        "OVERNIGHT_DONE_CHECK_FILE": str(told),
    }
    code, out, _ = _adapter(tmp_path, [[SUCCESS]], again)
    assert code == 0, out
    prompts = [json.loads(line) for line in (tmp_path / "prompts.jsonl").read_text().splitlines()]
    assert prompts == ["Do it."]


def test_a_usage_limit_with_no_reset_time_is_the_backoff_said_in_next(tmp_path: Path) -> None:
    limited = [
        "result",
        {"subtype": "success", "is_error": True, "result": "You've hit your limit"},
    ]
    started = time.monotonic()
    code, out, _ = _adapter(tmp_path, [[["tool", "one"], limited], [SUCCESS]])
    assert code == 0, out
    assert time.monotonic() - started >= 0.5  # usage_backoff_seconds
    calls = _calls(tmp_path)
    session = calls[0][calls[0].index("--session-id") + 1]
    assert calls[1][:2] == ["--resume", session]  # the same session after the wait
    notes = _checkpoint(tmp_path)["notes"]
    assert any(n.startswith("usage limit with no reset time: retrying at ") for n in notes)


def test_a_cli_that_keeps_failing_ends_the_adapter_after_5_tries(tmp_path: Path) -> None:
    code, out, _ = _adapter(tmp_path, [[["raw", "not json\n"], ["exit", 3]]])
    assert code == 1, out
    assert len(_calls(tmp_path)) == 5
    assert "the CLI failed 5 times in a row" in _checkpoint(tmp_path)["notes"][-1]


def test_an_api_error_after_the_clis_retries_is_a_backoff_not_a_failure(tmp_path: Path) -> None:
    overloaded = ["result", {"is_error": True, "api_error_status": 529, "result": "529"}]
    code, out, _ = _adapter(tmp_path, [[overloaded]] * 7 + [[SUCCESS]])
    assert code == 0, out  # seven in a row: more than the failures that end it
    assert len(_calls(tmp_path)) == 8


def test_a_line_over_the_bound_is_dropped_and_the_run_goes_on(tmp_path: Path) -> None:
    huge = '{"type": "assistant", "x": "' + "x" * (system.MAX_LINE_BYTES + 10) + '"}\n'
    code, out, _ = _adapter(tmp_path, [[["raw", huge], ["tool", "after"], SUCCESS]])
    assert code == 0, out
    assert _checkpoint(tmp_path)["step"] == 1


def test_the_line_reader_holds_at_most_its_bound() -> None:
    read, write = os.pipe()
    out: Queue[tuple[Any, ...]] = Queue()
    reader = system.LineReader(os.fdopen(read, "rb"), out, max_bytes=100)
    reader.start()
    with os.fdopen(write, "wb") as pipe:
        pipe.write(b'{"a": 1}\n' + b"y" * 1000 + b'\n{"b": 2}\nnot json\n{"c": 3}')
    reader.join(5)
    items = []
    while not out.empty():
        items.append(out.get())
    assert items == [("line", {"a": 1}), ("line", {"b": 2}), ("line", {"c": 3}), ("eof", "line")]
    assert reader.dropped == 1


# --- the MCP server ------------------------------------------------------------------------


def test_the_mcp_server_speaks_json_rpc_and_relays_each_call(tmp_path: Path) -> None:
    inbox: Queue[tuple[Any, ...]] = Queue()
    relay = mcp.Relay(str(tmp_path / "relay.sock"), inbox)
    relay.start()
    calls: list[dict[str, Any]] = []

    def adapter() -> None:
        _, request, reply = inbox.get(timeout=CAP)
        calls.append(request)
        reply(True, "yes")

    threading.Thread(target=adapter, daemon=True).start()
    server = subprocess.Popen(
        [sys.executable, str(KIT / "coding_agent_mcp.py"), "--socket", relay.path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None

    def ask(message: dict[str, Any]) -> dict[str, Any]:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(message) + "\n")
        server.stdin.flush()
        return dict(json.loads(server.stdout.readline()))

    try:
        probe = ask({"jsonrpc": "2.0", "id": "p", "method": "server/discover", "params": {}})
        assert probe["error"]["code"] == -32601  # Claude Code then falls back to initialize
        hello = ask(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}},
            }
        )
        assert hello["result"]["protocolVersion"] == "2025-06-18"
        assert hello["result"]["capabilities"]["tools"] == {"listChanged": False}
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        server.stdin.write("\n")
        listed = ask({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        names = [tool["name"] for tool in listed["result"]["tools"]]
        assert names == ["ask_person", "wait_until", "report_progress"]
        arguments = {"question": "Ship it?", "choices": ["yes", "no"]}
        called = ask(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "ask_person", "arguments": arguments},
            }
        )
        assert called["result"] == {"content": [{"type": "text", "text": "yes"}], "isError": False}
        assert calls == [{"tool": "ask_person", "arguments": arguments}]
        unknown = ask({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "x"}})
        assert unknown["result"]["isError"] is True
    finally:
        server.stdin.close()
        server.wait(10)
        server.stdout.close()
        relay.close()
    assert server.returncode == 0  # stdin closed (the CLI gone): it ends


def test_a_relayed_call_without_the_adapter_says_so(tmp_path: Path) -> None:
    ok, text = mcp.relay_call(str(tmp_path / "nobody.sock"), "ask_person", {"question": "?"})
    assert not ok and "cannot be reached" in text


# --- spend ---------------------------------------------------------------------------------


def test_claude_spend_keeps_what_a_killed_process_spent(tmp_path: Path) -> None:
    spend = ClaudeSpend(str(tmp_path / "spend.json"), {}, "")
    spend.process_started("s1", 0.0)
    spend.message("m1", "claude-test", {"input_tokens": 100, "output_tokens": 1})
    spend.message("m1", "claude-test", {"input_tokens": 100, "output_tokens": 20})  # final
    usage = {"claude-test": {"inputTokens": 100, "outputTokens": 20, "costUSD": 0.0008}}
    spend.result(0.0008, 0.0008, usage)  # $4/M input-equivalent, learnt
    spend.process_started("s1", 0.0008)  # resumed, then SIGKILLed before its result
    spend.message("m2", "claude-test", {"input_tokens": 200, "output_tokens": 40})
    usd, tokens_in, tokens_out = spend.total()
    assert usd == pytest.approx(0.0008 + 0.0016)  # the second at the learnt rate
    assert (tokens_in, tokens_out) == (300, 60)
    spend.process_started("s1", 0.0008)  # its total dropped the killed process's spend
    spend.result(0.0008, 0.0016, {"claude-test": {"inputTokens": 100, "outputTokens": 20}})
    assert spend.total()[0] == pytest.approx(0.0032)
    spend.save()
    again = ClaudeSpend(str(tmp_path / "spend.json"), {}, "")
    assert again.rates["claude-test"] == pytest.approx(4e-6)  # kept for the next process


def test_claude_spend_is_never_less_than_the_clis_own_total_since_this_start() -> None:
    spend = ClaudeSpend("/nonexistent/spend.json", {}, "")
    spend.process_started("s1", 1.0)  # restored $1 spent before this adapter: not ours
    spend.result(None, 1.5, {})
    assert spend.total()[0] == pytest.approx(0.5)


def test_codex_spend_is_its_tokens_since_this_start_at_the_price_table() -> None:
    prices = {"gpt-6": {"input_per_mtok": 2.0, "cached_input_per_mtok": 0.5, "output_per_mtok": 8}}
    spend = CodexSpend("/nonexistent/spend.json", prices, "gpt-6.2-sol")
    before = {"input_tokens": 1000, "cached_input_tokens": 0, "output_tokens": 100}
    spend.thread_totals("t1", before, new=False)  # resumed: spent before this process
    now = {"input_tokens": 3000, "cached_input_tokens": 1000, "output_tokens": 600}
    spend.thread_totals("t1", now, new=False)
    usd, tokens_in, tokens_out = spend.total()
    assert (tokens_in, tokens_out) == (2000, 500)
    assert usd == pytest.approx((1000 * 2.0 + 1000 * 0.5 + 500 * 8) / 1e6)
    unpriced = CodexSpend("/nonexistent/spend.json", {}, "gpt-x")
    unpriced.thread_totals("t2", now, new=True)
    assert unpriced.total() == (0.0, 3000, 600) and unpriced.unpriced == {"gpt-x"}


# --- what the CLIs say ---------------------------------------------------------------------


def test_claude_results_are_classified_by_is_error_never_by_subtype() -> None:
    claude = clis.ClaudeCode("/bin/true", "/workspace/app", {"HOME": "/home/agent"})

    def outcome(**fields: Any) -> clis.Finished:
        events = claude.parse({"type": "result", **fields})
        assert isinstance(events[0], clis.Finished)
        return events[0]

    assert outcome(subtype="success", is_error=False).outcome == clis.SUCCESS
    assert outcome(subtype="success", is_error=True, result="x").outcome == clis.ERROR
    assert outcome(subtype="error_max_turns", is_error=True).outcome == clis.MAX_TURNS
    overloaded = outcome(subtype="success", is_error=True, api_error_status=529)
    assert (overloaded.outcome, overloaded.status) == (clis.API_ERROR, 529)
    assert outcome(is_error=True, result="Prompt is too long").outcome == clis.CONTEXT_FULL
    limit = {"status": "rejected", "resetsAt": 1796220000, "rateLimitType": "five_hour"}
    claude.parse({"type": "rate_limit_event", "rate_limit_info": limit})
    limited = outcome(subtype="success", is_error=True, result="You've hit your 5-hour limit")
    assert (limited.outcome, limited.resets_at) == (clis.USAGE_LIMIT, 1796220000)


def test_a_reset_said_only_as_a_clock_time_is_its_next_occurrence() -> None:
    now = datetime.datetime(2026, 12, 2, 10, 0, tzinfo=datetime.UTC).timestamp()
    text = "You've hit your 5-hour limit · resets 9:06am (UTC)"
    resets = claude_cli.reset_in_text(text, now)
    assert resets == datetime.datetime(2026, 12, 3, 9, 6, tzinfo=datetime.UTC).timestamp()
    assert clis.next_clock_time("at 11pm", now, True) == now + 13 * 3600
    assert clis.next_clock_time("no time here", now, True) is None


def test_codex_items_are_tool_calls_and_its_failures_are_classified() -> None:
    codex = clis.Codex("/x/node_modules/@openai/codex-linux-x64/vendor/t/bin/codex", "/w", {})
    item = {"id": "i1", "type": "command_execution", "command": "/bin/bash -lc 'pytest -q'"}
    started = codex.parse({"type": "item.started", "item": item})
    assert isinstance(started[0], clis.ToolStarted) and started[0].label == "shell `pytest -q`"
    done = codex.parse({"type": "item.completed", "item": item | {"exit_code": 1}})
    assert isinstance(done[1], clis.ToolFinished) and done[1].is_error
    failed = codex.parse(
        {
            "type": "turn.failed",
            "error": {"message": "exceeded retry limit, last status: 429 Too Many Requests"},
        }
    )  # noqa: E501
    assert isinstance(failed[0], clis.Finished)
    assert (failed[0].outcome, failed[0].status) == (clis.API_ERROR, 429)
    limited = codex.parse(
        {
            "type": "turn.failed",
            "error": {"message": "You've hit your usage limit. Try again at 9:10 AM."},
        }
    )  # noqa: E501
    assert isinstance(limited[0], clis.Finished) and limited[0].outcome == clis.USAGE_LIMIT
    rollout = [
        {"type": "event_msg", "payload": {"type": "token_count", "rate_limits": {
            "primary": {"used_percent": 100.0, "resets_at": 1796220000}}}},
    ]  # fmt: skip
    assert clis.Codex.rollout_facts(rollout)["resets_at"] == 1796220000


# --- the session store ---------------------------------------------------------------------


def test_a_transcript_written_during_a_tool_call_is_checkpointed_before_the_call_ends(
    tmp_path: Path,
) -> None:
    # The call is held open until the test lets it go: whatever the load, a checkpoint the
    # test sees while it is held was taken before the call ended.
    go = tmp_path / "go"
    slow = [["tool", "t1"], ["start", "t2"], ["sleep", 1], ["append", "t1 done"], ["hold", str(go)]]
    script = [[*slow, ["finish", "t2"], SUCCESS]]
    ran = threading.Thread(target=_adapter, args=(tmp_path, script), daemon=True)
    ran.start()

    def transcript_size() -> int:
        found = list((tmp_path / ".claude" / "projects").glob("*/*.jsonl"))
        late = [path for path in found if "t1 done" in path.read_text()]
        return late[0].stat().st_size if late else 0

    def checkpointed_size() -> object:
        try:
            return _checkpoint(tmp_path)["coding_agent"]["session_file"]["bytes"]
        except (OSError, ValueError, KeyError):
            return None

    try:
        give_up = time.monotonic() + CAP
        while not transcript_size() and time.monotonic() < give_up:
            time.sleep(0.05)
        size = transcript_size()
        assert size, "the CLI never wrote its late transcript"
        # While the call is still held: a sandbox lost now still carries step 1.
        give_up = time.monotonic() + CAP
        while checkpointed_size() != size and time.monotonic() < give_up:
            time.sleep(0.05)
        assert checkpointed_size() == size
    finally:
        go.touch()
    ran.join(timeout=CAP)


def test_the_session_store_appends_what_a_session_file_grew_by(tmp_path: Path) -> None:
    home = tmp_path / "home"
    session = home / "projects" / "-w" / "s1.jsonl"
    session.parent.mkdir(parents=True)
    session.write_text('{"a": 1}\n')
    store = system.SessionStore(str(tmp_path / "store"), str(home))
    assert store.save(str(session)) == ""
    with session.open("a") as out:
        out.write('{"b": 2}\n')
    assert store.save(str(session)) == ""
    kept = tmp_path / "store" / "projects" / "-w" / "s1.jsonl"
    assert kept.read_text() == session.read_text()
    digest = system.GrowingDigest()
    assert digest.update(str(session)) == system.file_digest(str(session))
    with session.open("a") as out:
        out.write('{"c": 3}\n')
    assert digest.update(str(session)) == system.file_digest(str(session))
    fresh = system.SessionStore(str(tmp_path / "store"), str(tmp_path / "new-home"))
    found = fresh.find(lambda relative: relative.endswith("s1.jsonl"))
    assert found == ["projects/-w/s1.jsonl"]
    assert fresh.restore(found[0], "projects/-other/s1.jsonl") == ""
    assert (tmp_path / "new-home/projects/-other/s1.jsonl").read_text() == '{"a": 1}\n{"b": 2}\n'


def test_session_lines_are_read_as_they_grow_a_chunk_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(system.JsonLines, "CHUNK", 7)
    monkeypatch.setattr(system, "MAX_LINE_BYTES", 40)
    path = tmp_path / "session.jsonl"
    path.write_text('{"type": "assistant", "n": 1}\n{"type": "user", "n": 2}\n')
    lines = system.JsonLines(str(path), 0, (b'"assistant"',))
    assert list(lines.new()) == [{"type": "assistant", "n": 1}]  # the user line not parsed
    with path.open("a") as out:
        out.write('{"type": "assistant", "big": "' + "x" * 100 + '"}\n{"type": "assistant"')
    assert list(lines.new()) == []  # the long line skipped, the last not complete yet
    with path.open("a") as out:
        out.write(', "n": 3}\n')
    assert list(lines.new()) == [{"type": "assistant", "n": 3}]
