"""The real pinned CLIs, headless against the fake model API, each inside bubblewrap with its
install mounted read-only and run as an unprivileged uid (where bubblewrap works; else on the
host): a three-tool-call task, then a SIGKILL during a tool call and a resume of the same
session. A few seconds each; one install per session (conftest)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fakes.model_api import FakeModelApi, ReadFile, Shell, WriteFile, text, tools, usage_limit
from overnight.core.agent_kinds import agent_cli
from overnight.worker.agent_clis import Installed
from tests.agent_clis.clis import Driver, Running, executable_name
from tests.agent_clis.conftest import measure
from tests.agent_clis.sandbox import Sandbox, bubblewrap_works
from tests.kinds import KIND_FACTS, facts
from tests.waits import CAP


@pytest.fixture(params=sorted(KIND_FACTS))
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def sandbox(kind: str, installed_cli: Callable[[str], Installed], tmp_path: Path) -> Sandbox:
    installed = installed_cli(kind)
    return Sandbox.make(tmp_path / "sandbox", agent_cli(kind), installed.folder, bubblewrap_works())


@pytest.fixture
def processes() -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for running in started:
        running.clean_up()


def test_a_three_tool_call_task_finishes(
    kind: str, sandbox: Sandbox, processes: list[Running]
) -> None:
    notes = f"{sandbox.work_inside}/notes.txt"
    command = "wc -c < notes.txt; id -u"
    if sandbox.isolated:  # (on the host, as root, it would write into the install)
        command += f"; touch {sandbox.cli_folder_inside}/probe || echo CLI read-only"
    script = [
        tools(WriteFile(notes, "hello from the fake\n"), label="write"),
        tools(Shell(command), label="run"),
        tools(ReadFile(notes), label="read"),
        text("All three done.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        driver = facts(kind).driver(sandbox, fake)
        running = driver.start(driver.first("Write notes.txt, count it, read it back."))
        processes.append(running)
        finished = running.wait(timeout=120)
        requests = fake.requests()

    assert finished.returncode == 0, finished.describe()
    session_id, final = driver.finished(finished.lines)
    assert final == "All three done."
    assert [r.label for r in requests] == ["write", "run", "read", "final"]
    assert fake.session_ids() == [session_id] and fake.script.unmatched == []
    # Each request after the first carries the results of the calls the one before made.
    for before, after in zip(requests, requests[1:], strict=False):
        assert [r.call_id for r in after.last_tool_results()] == list(before.call_ids)
    run_output = requests[2].last_tool_results()[0].output
    assert "20" in run_output  # wc -c of the file the first call wrote
    assert "hello from the fake" in requests[3].last_tool_results()[0].output
    assert (sandbox.work / "notes.txt").read_text() == "hello from the fake\n"
    if sandbox.isolated:
        assert "CLI read-only" in run_output and "Read-only file system" in run_output
        if sandbox.uid is not None:
            assert str(sandbox.uid) in run_output
    measure(
        f"{kind}: start to first model request (s)", requests[0].received_at - running.started_at
    )
    measure(
        f"{kind}: three-tool task, whole run (s)", requests[-1].received_at - running.started_at
    )


def test_sigkill_during_a_tool_call_resumes_the_same_session(
    kind: str, sandbox: Sandbox, processes: list[Running]
) -> None:
    script = [
        tools(Shell("echo first > first.txt"), label="first"),
        # Sleeps past every wait below, so it is still running when the CLI is killed.
        tools(Shell("echo started > started.txt && exec sleep 600"), label="sleep"),
        text("Resumed; done.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        driver = facts(kind).driver(sandbox, fake)
        running = driver.start(driver.first("Write first.txt, then wait."))
        processes.append(running)
        sleep_call = _wait_for_tool_running(fake, driver, sandbox, kind)
        cli = running.cli_pid()
        # started.txt is written just before the shell execs sleep: wait for the exec.
        deadline = time.monotonic() + CAP
        while "sleep" not in [executable_name(pid) for pid in running.tree()]:
            assert time.monotonic() < deadline, "the tool call's sleep never ran"
            time.sleep(0.02)
        killed_at = time.monotonic()
        os.kill(cli, signal.SIGKILL)
        killed = running.wait(timeout=CAP)
        session_id = fake.requests()[0].session_id

        resumed = driver.start(driver.resume(session_id, "continue"))
        processes.append(resumed)
        finished = resumed.wait(timeout=120)
        requests = fake.requests()

    assert killed.returncode != 0
    assert finished.returncode == 0, finished.describe()
    resumed_session, final = driver.finished(finished.lines)
    assert resumed_session == session_id and final == "Resumed; done."
    assert fake.session_ids() == [session_id] and fake.script.unmatched == []
    assert len(requests) == 3  # no model turn redone
    after = requests[2]
    first_call = requests[0].call_ids[0]
    # What the resumed CLI sends for the call its kill interrupted (../shared/reference).
    facts(kind).resumed_after_kill(after, first_call, sleep_call, said=True)
    measure(
        f"{kind}: SIGKILL to the resumed CLI's first model request (s)",
        after.received_at - killed_at,
    )
    measure(
        f"{kind}: resume start to first model request (s)", after.received_at - resumed.started_at
    )


def test_a_usage_limit_reaches_the_cli_with_its_reset_time(
    kind: str, sandbox: Sandbox, processes: list[Running]
) -> None:
    """The fake's usage limit is what the CLI reads as one (not retried), and says so its
    own way (its driver's `usage_limit_reported`, tests/kinds/): Claude Code in subscription
    mode prints its `rate_limit_event` with the reset time; Codex fails the turn and records
    the reset in its rollout's `rate_limits`."""
    resets_at = int(time.time()) + 5 * 3600
    with FakeModelApi([usage_limit(resets_at)]) as fake:
        driver = facts(kind).driver(sandbox, fake, subscription=True)
        running = driver.start(driver.first("Anything."))
        processes.append(running)
        finished = running.wait(timeout=60)
    assert finished.returncode == driver.usage_limit_exit, finished.describe()
    assert len(fake.requests()) == 1, finished.describe()
    driver.usage_limit_reported(finished, resets_at)


def _wait_for_tool_running(fake: FakeModelApi, driver: Driver, sandbox: Sandbox, kind: str) -> str:
    """Wait until the sleep call runs and the CLI's session file records it (Claude Code
    writes its session a little after a tool starts: killed before that, the resumed session
    has lost the call and the result before it). Its call id."""
    fake.wait_for_answers(2, timeout=60)
    sleep_call = fake.requests()[1].call_ids[0]
    recorded = facts(kind).call_in_session
    deadline = time.monotonic() + CAP
    while not (
        (sandbox.work / "started.txt").exists() and recorded(driver.session_mentions, sleep_call)
    ):
        assert time.monotonic() < deadline, "the sleep call never ran, or was never recorded"
        time.sleep(0.02)
    return sleep_call
