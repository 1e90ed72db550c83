"""overnight's coding-agent adapter (overnight/agent_kit/coding_agent.py) supervising the real
pinned CLIs, each in bubblewrap against the fake model API (tests/agent_clis/adapter.py lays
out the sandbox): a task done with its work pushed and its spend reported; a SIGKILL of the
CLI during a tool call resumed in the same session with its leftover ended; 529s and a usage
limit waited out in the same session; a loop, `max_turns` and a fresh sandbox; a question
through the MCP server. A few seconds each; one install of each CLI per session."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fakes.model_api import (
    FakeModelApi,
    McpTool,
    ReadFile,
    Shell,
    ToolSearch,
    WriteFile,
    overloaded,
    text,
    tools,
    usage_limit,
)
from overnight.agent_kit.coding_agent import LOOP_EXIT_CODE
from overnight.core.agent_kinds import agent_cli
from overnight.core.agent_spec import LOOP_EXIT_CODE as SUPERVISOR_LOOP_EXIT_CODE
from overnight.worker.agent_clis import Installed
from tests.agent_clis.adapter import BRANCH, Adapter, Workspace, environment, wait_until
from tests.agent_clis.clis import Driver
from tests.agent_clis.conftest import measure
from tests.agent_clis.sandbox import Sandbox, bubblewrap_works
from tests.kinds import KIND_FACTS, facts
from tests.waits import CAP


@pytest.fixture(params=sorted(KIND_FACTS))
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_workspace(
    kind: str, installed_cli: Callable[[str], Installed], tmp_path: Path
) -> Callable[..., Workspace]:
    installed = installed_cli(kind)

    def make(name: str = "sandbox", store: Path | None = None, origin_from: Path | None = None):
        sandbox = Sandbox.make(
            tmp_path / name, agent_cli(kind), installed.folder, bubblewrap_works()
        )
        if store is not None:
            store.mkdir(exist_ok=True)
        return Workspace(sandbox, store).make(origin_from)

    return make


@pytest.fixture
def adapters() -> list[Adapter]:
    started: list[Adapter] = []
    yield started  # type: ignore[misc]
    for adapter in started:
        adapter.clean_up()


def _start(adapters: list[Adapter], ws: Workspace, fake: FakeModelApi, **env: str) -> Adapter:
    adapter = Adapter.start(ws, environment(fake, ws.sandbox.cli.kind, ws, **env))
    adapters.append(adapter)
    return adapter


def _driver(ws: Workspace, fake: FakeModelApi) -> Driver:
    return facts(ws.sandbox.cli.kind).driver(ws.sandbox, fake)


def test_the_loop_exit_code_is_overnights() -> None:
    assert LOOP_EXIT_CODE == SUPERVISOR_LOOP_EXIT_CODE == 76


def test_a_three_tool_call_task_finishes_with_its_work_on_the_origin(
    kind: str, make_workspace: Callable[..., Workspace], adapters: list[Adapter]
) -> None:
    ws = make_workspace()
    notes = ws.inside("app/notes.txt")
    script = [
        tools(WriteFile(notes, "hello from the fake\n"), label="write"),
        tools(Shell("wc -c < notes.txt"), label="run"),
        tools(ReadFile(notes), label="read"),
        text("All three done.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        ws.write_config(fake)
        adapter = _start(adapters, ws, fake)
        code, out, err = adapter.wait()
        requests = fake.requests()

    assert code == 0, out[-2000:] + err[-2000:]
    assert [r.label for r in requests] == ["write", "run", "read", "final"]
    assert len(fake.session_ids()) == 1 and fake.script.unmatched == []
    steps = ws.steps()
    assert [s["step"] for s in steps] == [1, 2, 3]  # a checkpoint per tool call
    assert steps[0]["committed"] and not steps[1]["committed"]  # only the write changed files
    checkpoint = ws.checkpoint()
    assert checkpoint["step"] == 3 and checkpoint["next"] == "done"
    assert checkpoint["session_id"] == fake.session_ids()[0]
    assert checkpoint["head"] == ws.origin_head()  # pushed to the run's branch
    assert ws.origin_file("notes.txt") == "hello from the fake"
    assert ws.origin_log()[-1] == "initial"
    assert ws.origin_log()[0].startswith("step 1: ")
    found = ws.requests()
    assert found["finish"]["outputs"] == {"branch": BRANCH, "commit": ws.origin_head()}
    assert found["finish"]["summary"] == "All three done."
    usage = found["usage"]
    assert usage["input_tokens"] >= 400 and usage["output_tokens"] >= 80
    if facts(kind).reports_own_usd:
        assert usage["usd"] > 0  # the CLI's own dollars
    else:  # tokens at the price table: 400 in at $1/M, 80 out at $10/M
        assert usage["usd"] == pytest.approx(0.0012)
    whole = time.monotonic() - adapter.started_at
    measure(f"{kind} adapter: three-tool task, whole run (s)", whole)


def test_a_sigkill_of_the_cli_during_a_tool_call_resumes_the_same_session(
    kind: str, make_workspace: Callable[..., Workspace], adapters: list[Adapter]
) -> None:
    ws = make_workspace()
    script = [
        tools(Shell("echo first >> first.txt"), label="first"),
        # Sleeps past every wait below: still running when the CLI (or sandbox) is killed.
        tools(Shell("echo started > started.txt && exec sleep 600"), label="sleep"),
        text("Resumed; done.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        ws.write_config(fake)
        adapter = _start(adapters, ws, fake)
        driver = _driver(ws, fake)
        fake.wait_for_answers(2, timeout=60)
        sleep_call = fake.requests()[1].call_ids[0]
        # The shell writes started.txt a moment before it becomes the sleep (exec).
        wait_until(
            lambda: (
                (ws.app / "started.txt").exists()
                and facts(kind).call_in_session(driver.session_mentions, sleep_call)
                and bool(adapter.named("sleep"))
            ),
            what="the sleep call running and in the session file",
        )
        sleeps = adapter.named("sleep")
        killed_at = time.monotonic()
        os.kill(adapter.cli_pid(), signal.SIGKILL)
        resumed = fake.wait_for_requests(3, timeout=CAP)[2]
        back_at = resumed.received_at
        left = [pid for pid in sleeps if pid in adapter.tree()]
        code, out, err = adapter.wait()
        requests = fake.requests()

    assert code == 0, out[-2000:] + err[-2000:]
    assert left == []  # the killed CLI's tool, ended before the resume
    assert fake.session_ids() == [requests[0].session_id]  # the same session throughout
    assert len(requests) == 3  # no model turn redone
    facts(kind).resumed_after_kill(requests[2], requests[0].call_ids[0], sleep_call)
    assert (ws.app / "first.txt").read_text() == "first\n"  # no tool call done twice
    notes = " ".join(ws.checkpoint()["notes"])
    assert "crashed (killed by signal 9" in notes  # (and its stderr's last line, if any)
    if facts(kind).tool_outlives_cli:  # (Claude Code's does; Codex's dies with it)
        assert f"during {facts(kind).shell_tool} `echo started" in notes
        assert "ended what it left: " in notes
        assert "sleep (pid " in notes
    assert ws.checkpoint()["step"] == 1  # the interrupted call never completed
    redone = len(requests) - len({r.turn_index for r in requests})
    measure(f"{kind} adapter: model turns redone per crash", redone)
    back = back_at - killed_at
    measure(f"{kind} adapter: CLI SIGKILL to its resumed first model request (s)", back)
    log = ws.log()
    ended = [line["at"] for line in log if line["event"] == "cli_ended"][0]
    again = [line["at"] for line in log if line["event"] == "cli_started"][1]
    measure(f"{kind} adapter: the CLI's end to its resume started (s)", again - ended)
    # Resumed at once: nothing logged between the crash and the restart is a wait. (How long
    # that takes is a figure above, not a bound here: load moves it.)
    between = [line["event"] for line in log if ended <= line["at"] <= again]
    assert not {"api_backoff", "usage_limit"} & set(between), between


def test_529s_after_the_clis_own_retries_are_waited_out_in_the_same_session(
    make_workspace: Callable[..., Workspace], adapters: list[Adapter], kind: str
) -> None:
    if not facts(kind).retries_quickly:
        pytest.skip(f"{kind}'s own retries of a 529 take minutes at its default settings")
    ws = make_workspace()
    script = [
        overloaded(times=4),
        tools(Shell("echo hi"), label="hi"),
        text("Done despite the overload.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        ws.write_config(fake)
        code, out, err = _start(adapters, ws, fake).wait()
        requests = fake.requests()
    assert code == 0, out[-2000:] + err[-2000:]
    assert [r.status for r in requests] == [529, 529, 529, 529, 200, 200]
    assert len(fake.session_ids()) == 1
    backoffs = [line for line in ws.log() if line["event"] == "api_backoff"]
    assert [b["status"] for b in backoffs] == [529, 529]  # 2 CLI processes of 2 tries each
    assert ws.requests()["finish"]["summary"] == "Done despite the overload."
    # Each wait the API asked for moved the progress mark: the API is there, no stall.
    mark = ws.checkpoint()["progress_mark"]
    assert mark["waits"] >= 2 and mark["step"] == 1, mark


def test_a_usage_limit_waits_for_its_reset_then_the_same_session_goes_on(
    kind: str, make_workspace: Callable[..., Workspace], adapters: list[Adapter]
) -> None:
    ws = make_workspace()
    resets_at = int(time.time()) + 5 * 3600
    script = [
        usage_limit(resets_at, label="limited"),
        tools(Shell("echo after the reset"), label="after"),
        text("Done after the wait.", label="final"),
    ]
    # (Claude Code: its subscription mode, where the CLI says when the window resets.)
    extra = dict(facts(kind).usage_limit_env)
    with FakeModelApi(script) as fake:
        ws.write_config(fake)
        adapter = _start(adapters, ws, fake, **extra)  # type: ignore[arg-type]
        wait = wait_until(lambda: ws.requests().get("wait"), what="a wait_until request")
        assert adapter.process.poll() is None and len(fake.requests()) == 1
        assert "usage limit" in wait["reason"]
        until = wait["until"].replace("Z", "+00:00")
        from datetime import datetime

        assert abs(datetime.fromisoformat(until).timestamp() - resets_at) < 2
        assert "usage limit: waiting until" in ws.checkpoint()["next"]
        ws.answer(wait["id"], "woken")  # overnight wakes the paused sandbox at the reset
        code, out, err = adapter.wait()
        requests = fake.requests()
    assert code == 0, out[-2000:] + err[-2000:]
    assert [r.label for r in requests] == ["limited", "after", "final"]
    # (A session whose first answer never came is not on disk for some: a seeded new one.)
    assert len(fake.session_ids()) == (1 if facts(kind).keeps_unanswered_session else 2)
    assert "wait" not in ws.requests()


def test_the_same_tool_call_again_and_again_is_a_loop(
    kind: str, make_workspace: Callable[..., Workspace], adapters: list[Adapter]
) -> None:
    ws = make_workspace()
    # The 9th turn is slow to come (30 s): the adapter stops the CLI while it waits, after the
    # 8th call. Answered at once, or after 0.3 s, the CLI ran a turn or two more under load.
    again = tools(Shell("pytest -q"), times=8, label="again")
    slow = tools(Shell("pytest -q"), times=12, label="again", delay_seconds=30)
    with FakeModelApi([again, slow]) as fake:
        ws.write_config(fake)
        code, out, err = _start(adapters, ws, fake).wait()
    assert code == LOOP_EXIT_CODE, out[-2000:] + err[-2000:]
    checkpoint = ws.checkpoint()
    name = facts(kind).shell_tool
    assert f"loop: {name} `pytest -q` 8 times in a row" in checkpoint["notes"]
    # Stopped at the 8th (the CLI may have done one more before its SIGKILL).
    assert checkpoint["step"] in (8, 9)
    assert checkpoint["coding_agent"]["session_open"] is False  # the next start: a new session
    assert len(fake.requests()) <= 10


def test_max_turns_is_a_fresh_context_and_the_next_start_a_seeded_session(
    kind: str, make_workspace: Callable[..., Workspace], adapters: list[Adapter]
) -> None:
    ws = make_workspace()
    script = [
        tools(WriteFile(ws.inside("app/one.txt"), "one\n"), label="one"),
        tools(Shell("echo two"), label="two"),
        tools(Shell("echo three"), label="three"),
    ]
    with FakeModelApi(script) as fake:
        ws.write_config(fake, max_turns=2)
        code, out, err = _start(adapters, ws, fake).wait()
        assert code == 75, out[-2000:] + err[-2000:]
        checkpoint = ws.checkpoint()
        # A CLI that stops itself (Claude Code: --max-turns) is at step 2; one the adapter
        # stops after its 2nd call (Codex) may complete a call it was quick to start meanwhile.
        stops_itself = facts(kind).stops_at_max_turns
        assert checkpoint["step"] == 2 or (not stops_itself and checkpoint["step"] == 3)
        assert "max turns (2) reached" in checkpoint["notes"][-1]
        first_session = fake.session_ids()[0]

        fake.script.extend([text("Finished in a new session.", label="final")])
        ws.write_config(fake)
        code, out, err = _start(adapters, ws, fake).wait()
        requests = fake.requests()
    assert code == 0, out[-2000:] + err[-2000:]
    sessions = fake.session_ids()
    assert len(sessions) == 2 and sessions[0] == first_session
    seeded = [r for r in requests if r.session_id == sessions[1]][0].text()
    assert "Do the task." in seeded and "This task was begun in an earlier session" in seeded
    assert "step 1: " in seeded  # the branch's log
    notes = ws.checkpoint()["notes"]
    assert any("a new session seeded from the checkpoint" in note for note in notes)


def test_ask_person_through_mcp_waits_for_the_answer_and_the_model_gets_it(
    kind: str, make_workspace: Callable[..., Workspace], adapters: list[Adapter]
) -> None:
    ws = make_workspace()
    ask = McpTool("overnight", "ask_person", {"question": "Ship it?", "choices": ["yes", "no"]})
    script = [tools(ask, label="ask"), text("Shipping.", label="final")]
    if facts(kind).mcp_through_tool_search:  # (Codex offers MCP tools only so)
        script.insert(0, tools(ToolSearch("ask a person"), label="search"))
    with FakeModelApi(script) as fake:
        ws.write_config(fake)
        adapter = _start(adapters, ws, fake)
        asked = wait_until(lambda: ws.requests().get("ask"), what="a kit ask request")
        assert (asked["question"], asked["choices"]) == ("Ship it?", ["yes", "no"])
        assert ws.checkpoint()["next"] == "waiting for an answer: Ship it?"
        time.sleep(0.3)
        assert len(fake.requests()) == len(script) - 1  # the model waits for the answer
        ws.answer(asked["id"], "yes")
        code, out, err = adapter.wait()
        requests = fake.requests()
    assert code == 0, out[-2000:] + err[-2000:]
    answered = requests[-1].last_tool_results()
    assert len(answered) == 1 and "yes" in answered[0].output
    assert "ask" not in ws.requests()
    assert [s["label"] for s in ws.steps()][-1].startswith(
        facts(kind).mcp_step("overnight", "ask_person")
    )


def stored_result(store: Path, kind: str, call_id: str) -> bool:
    """Whether the session store's copy of the transcript holds the result of `call_id`."""
    needle = facts(kind).tool_result_stored(call_id)
    for path in store.rglob("*.jsonl"):
        try:
            if needle.search(path.read_text(errors="replace")):
                return True
        except OSError:
            continue
    return False


@pytest.mark.parametrize("with_store", [True, False], ids=["session-store", "no-store"])
def test_a_fresh_sandbox_resumes_the_session_from_the_store_else_seeds_a_new_one(
    kind: str,
    with_store: bool,
    make_workspace: Callable[..., Workspace],
    adapters: list[Adapter],
    tmp_path: Path,
) -> None:
    store = tmp_path / "store" if with_store else None
    first = make_workspace("first", store=store)
    script = [
        tools(Shell("echo one > one.txt"), label="one"),
        # Sleeps past every wait below: still running when the CLI (or sandbox) is killed.
        tools(Shell("echo started > started.txt && exec sleep 600"), label="sleep"),
        text("Done in the second sandbox.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        first.write_config(fake)
        adapter = _start(adapters, first, fake)
        wait_until(lambda: first.steps() and (first.app / "started.txt").exists(), what="step 1")
        wait_until(lambda: first.origin_log()[:1] == ["step 1: " + first.steps()[0]["label"]])
        if store is not None:
            # The CLI writes its transcript a moment late and the adapter copies it within a
            # second (SESSION_LOOK_SECONDS): on a loaded machine the loss must come after.
            call = fake.requests()[0].call_ids[0]
            wait_until(lambda: stored_result(store, kind, call), what="call 1's result stored")
        adapter.kill()  # the sandbox lost
        adapter.wait()
        session = fake.session_ids()[0]

        second = make_workspace("second", store=store, origin_from=first.origin)
        (second.checkpoint_file).write_bytes(first.checkpoint_file.read_bytes())
        if second.sandbox.uid is not None:
            os.chown(second.checkpoint_file, second.sandbox.uid, second.sandbox.uid)
        second.write_config(fake)
        code, out, err = _start(adapters, second, fake).wait()
        requests = fake.requests()
    assert code == 0, out[-2000:] + err[-2000:]
    assert (second.app / "one.txt").read_text() == "one\n"  # from the origin
    notes = " ".join(second.checkpoint()["notes"])
    if with_store:
        assert fake.session_ids() == [session]
        assert "restored from the session store" in notes
        assert requests[-1].result_for(requests[0].call_ids[0]) is not None
    else:
        assert len(fake.session_ids()) == 2
        assert "cannot be resumed" in notes and "seeded from the checkpoint" in notes
        assert "step 1: " in requests[-1].text()
