"""Work that is only in its sandbox, held there (issue 50), on the time-skipping server: a
`keep_workspace` keep that cannot be pushed says so at once and holds the run (needs
attention, its sandbox paused where it stands) rather than going on to lose the work in a
crash; `overnight push` (the `push_again` update) keeps again and the run goes on. The same
update tries a refused push of the finished work again, and is refused when nothing waits.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from fakes.activities import FakeWorld, Quiet, exits, note, progress
from tests.workflows.harness import (
    eventually,
    keep_history,
    make_spec,
    started_run,
    status_of,
    until_state,
)
from tests.workflows.workspace_world import WorkspaceWorld, commit_of

REFUSAL = "remote: error: GH006: Protected branch update failed for refs/heads/agent/x."


@pytest.fixture
def kept() -> WorkspaceWorld:
    return WorkspaceWorld()


async def test_a_keep_that_cannot_be_pushed_holds_the_run_until_push_again(
    client: Client, kept: WorkspaceWorld
) -> None:
    kept.outcomes = {1: "failed"}
    kept.script(1, [progress(note("b", "a done")), Quiet(), exits(0, final=note("done"))])
    spec = make_spec(keep_workspace=True)
    async with started_run(client, kept, spec) as handle:
        held = await until_state(handle, "needs_attention")
        box_then = kept.state_of(1)
        await handle.execute_update("push_again", result_type=str)
        result = await handle.result()
        after = await status_of(handle)
        await keep_history(handle, "keep_failed_held_push_again")

    # Said at once, in the keep's own words, the sandbox paused with the work in it.
    assert held.attention_reason is not None
    assert held.attention_reason.startswith(
        "the workspace kept at checkpoint 1 could not be pushed to the origin: failed (fake)"
    )
    assert held.workspace is not None and "checkpoint 1" in (held.workspace.problem or "")
    assert box_then == "paused" and held.sandbox_id == "box-1"
    # Kept again (the next number), pushed, the same agent woken: nothing redone.
    assert [k.number for k in kept.keeps][:2] == [1, 2]
    assert kept.wakes == ["box-1"]
    assert (result.outcome, result.restarts, result.attempts) == ("finished", 0, 1)
    assert after.workspace is not None
    assert [(k.number, k.outcome) for k in after.workspace.kept][:2] == [
        (1, "failed"),
        (2, "pushed"),
    ]
    assert after.workspace.kept[1].commit == commit_of(2)


async def test_push_again_tries_a_refused_push_without_adding_to_the_budget(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    world.delivery.refusing = REFUSAL
    world.script(1, [exits(0)])
    spec = make_spec()
    async with started_run(client, world, spec) as handle:
        await time_skipping_env.sleep(timedelta(minutes=2))
        waiting = await until_state(handle, "needs_attention")
        world.delivery.refusing = None
        said = await handle.execute_update("push_again", result_type=str)
        result = await handle.result()
        after = await status_of(handle)

    assert waiting.attention_reason == f"the origin refused the push: {REFUSAL}"
    assert said == "trying again now"
    assert result.outcome == "finished"
    assert result.pushed_commit == world.delivery.origin[spec.branch]
    assert after.budget == waiting.budget  # nothing added


async def test_push_again_is_refused_when_nothing_waits_to_be_pushed(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1")])
    async with started_run(client, world, make_spec()) as handle:
        await eventually(lambda: status_of(handle), lambda s: s.state == "running")
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("push_again", result_type=str)
        await handle.signal("cancel", "done looking")
        await handle.result()

    assert "nothing waits to be pushed: the run is running" in str(refused.value.cause)
