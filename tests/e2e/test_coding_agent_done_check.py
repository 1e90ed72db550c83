"""The done check (`RunSpec.done_when`) with the real coding-agent CLIs: the dev server, a worker
in this process, a local bubblewrap sandbox and the real pinned Claude Code or Codex CLI, run by
overnight's adapter against the scripted fake model API (fakes/model_api).

The CLI's first session ends in a final answer without the file the check wants, so it exits 0
and the check fails. The adapter, started again in the same sandbox, makes the failure (the
command and the tail of its output) the next prompt of the same session; the model then writes
the file with a shell tool call, the check passes and the run finishes. The adapter's own steps
are unit-tested in tests/agent_clis/test_coding_agent.py; this checks that the failure reaches
the model through each real CLI, and what the supervisor makes of it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory

from fakes.model_api import FakeModelApi, Shell, text, tools
from fakes.model_api.turns import Answer
from overnight.cli import client as api
from overnight.core.done_check import shown_command
from tests.agent_clis.conftest import agents_home, installed_cli  # noqa: F401 (fixtures)
from tests.e2e.coding_agent_runs import (
    agents_queue,  # noqa: F401 (a fixture)
    cli_pids,
    credential,  # noqa: F401 (a fixture)
    fake_wait,
    kind,  # noqa: F401 (a fixture)
    sandbox_ids,
    start_coding_run,
)
from tests.e2e.helpers import wait_for_status
from tests.live import running_sandboxes

CHECK = "test -f fixed.txt || { echo 'fixed.txt is missing'; exit 1; }; cat fixed.txt"
MISSING = "fixed.txt is missing"
FIXED = "fixed by the agent"
TOLD = f"done check failed: {shown_command(CHECK)} (exit 1): told the CLI"


def quiet_waits(history: WorkflowHistory) -> list[str]:
    """The timers the run waited on after a look that came back early with nothing new."""
    summaries = [
        event.user_metadata.summary.data.decode()
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED
    ]
    return [summary for summary in summaries if "quiet agent" in summary]


@pytest.mark.timeout(600)
async def test_a_failed_done_check_is_the_clis_next_prompt_in_the_same_session_and_sandbox(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    kind: str,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
) -> None:
    script: list[Answer] = [
        text("Nothing to change: done.", label="first"),
        # Held a while, so the status still shows the failed round when the test reads it.
        tools(Shell(f"echo '{FIXED}' > fixed.txt"), label="fix", delay_seconds=3),
        text("fixed.txt is there now.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        spec, _ = await start_coding_run(
            dev_client,
            agents_queue,
            runs,
            tmp_path,
            fake,
            "cli-done",
            kind=kind,
            prompt="Make the done check pass.",
            done_when=[CHECK],
        )
        run_id = spec.run_id
        # Caps, not bounds (the test's own timeout is 600 s): a slow machine only makes them
        # slower. Whether the run saw the CLI's exit at once is asserted below, not timed.
        await fake_wait(fake.wait_for_requests, 2, timeout=240)
        failed = await wait_for_status(dev_client, run_id, lambda s: s.done_checks_used == 1)
        [sandbox] = await sandbox_ids(run_id)
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=300)
        status = await api.get_status(dev_client, run_id)
        requests = fake.requests()
        history = await dev_client.get_workflow_handle(run_id).fetch_history()

    # The session's next request carries the failed command and what it printed.
    assert [r.label for r in requests] == ["first", "fix", "final"]
    assert fake.script.unmatched == []
    first, told = requests[0].text(), requests[1].text()
    assert CHECK not in first and MISSING not in first
    assert f"command: {CHECK}" in told and "result: exit 1" in told
    assert told.rstrip().endswith(f"output:\n{MISSING}")  # the newest thing the model reads
    # The same session, resumed in the same sandbox: no restart, no new attempt.
    assert fake.session_ids() == [requests[0].session_id] and requests[0].session_id
    assert await sandbox_ids(run_id) == [sandbox]
    # While the agent was at it again, its status showed the one failed round.
    assert (failed.state, failed.attempt, failed.restarts_used) == ("running", 1, 0)
    assert failed.done_checks_used == 1
    [check] = failed.done_checks
    assert (check.command, check.round, check.passed, check.exit_code, check.tail) == (
        CHECK,
        1,
        False,
        1,
        MISSING,
    )
    # The second round passed: the run finished, the check's output in its result and status.
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert result.done_checks_used == 1 and status.done_checks_used == 1
    passed = [(c.command, c.round, c.passed, c.tail) for c in result.done_checks]
    assert passed == [(CHECK, 2, True, FIXED)]
    assert [(c.command, c.round, c.passed, c.tail) for c in status.done_checks] == passed
    assert (status.state, status.attempt, status.restarts_used) == ("finished", 1, 0)
    notes = json.loads(result.checkpoint or "{}")["notes"]
    assert TOLD in notes, notes
    # Every look that came back early (the gateway booked the CLI's model call, just before
    # it exited) was news: the next look came at once, never a wait on a timer to the stall
    # deadline with nobody watching (the CLI's exit then went unseen for up to 120 s).
    assert quiet_waits(history) == []
    # Nothing of the run is left running: no sandbox, no CLI.
    assert running_sandboxes(run_id) == [] and cli_pids(run_id, kind) == []
