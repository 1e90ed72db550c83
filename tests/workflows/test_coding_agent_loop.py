"""A coding agent's loop (`RunSpec.agent`): its adapter exits 76 when the same tool call comes
back with the same input 8 times in a row, with a note naming it; the supervisor restarts the
run from its checkpoint with that note as the reason, a restart cause of its own ("looped")
in the status's safety net, the metrics and the report. Runs of agents of one's own keep 76
as a crash; runs begun before the marker replay as they were."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio.client import Client

from activities.models import Observation
from fakes.activities import FakeWorld, exits, note, progress
from overnight.core.agent_spec import LOOP_EXIT_CODE
from overnight.core.models import RunSpec
from tests.workflows.harness import keep_history, make_spec, started_run, status_of
from tests.workflows.pure.test_decide import T0, running
from workflows.metrics import RESTART_CAUSES, restart_cause
from workflows.pure.decide import Restart, decide
from workflows.pure.safety_net import cause_of

LOOP_NOTE = 'loop: Bash {"command": "ls"} 8 times in a row'


def agent_spec(**overrides: Any) -> RunSpec:
    return RunSpec(
        run_id=f"run-{uuid.uuid4().hex[:12]}",
        repo="file:///tmp/repo",
        agent={"kind": "claude-code", "prompt": "Make the tests pass"},
        **overrides,
    )


def looped() -> Observation:
    return Observation(process_state="exited", exit_code=LOOP_EXIT_CODE, sandbox_state="running")


def test_exit_76_of_a_coding_agent_is_a_loop_restart_naming_its_note() -> None:
    state = running(spec=agent_spec(), loop_exit=True)
    state.progress.checkpoint = note("list the files", "step 3 done", LOOP_NOTE)
    assert decide(state, looped(), T0) == Restart(f"agent looped: {LOOP_NOTE}")


def test_a_loop_without_a_note_still_says_what_it_is() -> None:
    state = running(spec=agent_spec(), loop_exit=True)
    decision = decide(state, looped(), T0)
    assert isinstance(decision, Restart) and decision.reason.startswith("agent looped (exit 76")


def test_exit_76_is_a_crash_for_an_agent_of_ones_own_or_before_the_marker() -> None:
    assert decide(running(), looped(), T0) == Restart("agent crashed (exit 76)")
    before = running(spec=agent_spec(), loop_exit=False)
    assert decide(before, looped(), T0) == Restart("agent crashed (exit 76)")


@pytest.mark.parametrize(
    "reason",
    [f"agent looped: {LOOP_NOTE}", "agent looped: the sandbox stopped answering, agent crashed"],
)
def test_a_loop_is_a_cause_of_its_own(reason: str) -> None:
    assert cause_of(reason) == "looped"
    assert restart_cause(reason) == "looped"
    assert "looped" in RESTART_CAUSES


async def test_a_loop_restarts_from_the_checkpoint_with_its_note(
    client: Client, world: FakeWorld
) -> None:
    world.script(
        1, [progress(note("step 3", "step 2 done")), exits(76, final=note("x", LOOP_NOTE))]
    )
    world.script(2, [progress(note("done", "finished")), exits(0)])
    async with started_run(client, world, agent_spec()) as handle:
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "coding_agent_loop")

    reason = f"agent looped: {LOOP_NOTE}"
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 2, 1)
    assert world.creates()[1].restart_reason == reason
    assert world.creates()[1].checkpoint == note("x", LOOP_NOTE)
    [record] = status.restarts
    assert record.reason == reason
    assert status.safety_net is not None and status.safety_net.by_cause == {"looped": 1}


async def test_an_agent_of_ones_own_exiting_76_crashed(client: Client, world: FakeWorld) -> None:
    world.script(1, [progress("cp-1"), exits(76)])
    world.script(2, [exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        await handle.result()
        status = await status_of(handle)
    assert [r.reason for r in status.restarts] == ["agent crashed (exit 76)"]
