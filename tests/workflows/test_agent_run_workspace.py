"""The workspace kept at each checkpoint, on the time-skipping server: one keep per checkpoint
change, a restart from the latest kept workspace, a keep over the limit said and the run going
on, and the `rewind` update (refused with a reason, or a new attempt from checkpoint N's
workspace and checkpoint)."""

from __future__ import annotations

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError

from fakes.activities import Quiet, exits, note, progress
from tests.workflows.harness import (
    eventually,
    keep_history,
    make_spec,
    started_run,
    status_of,
)
from tests.workflows.workspace_world import BASE, WorkspaceWorld, commit_of


@pytest.fixture
def kept() -> WorkspaceWorld:
    return WorkspaceWorld()


async def test_each_checkpoint_is_kept_and_a_restart_starts_from_the_latest(
    client: Client, kept: WorkspaceWorld
) -> None:
    kept.script(
        1, [progress(note("b", "a done")), Quiet(), progress(note("c", "b done")), exits(3)]
    )
    kept.script(2, [exits(0, final=note("done"))])
    spec = make_spec(keep_workspace=True)
    async with started_run(client, kept, spec) as handle:
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "workspace_kept")
    assert result.outcome == "finished" and result.restarts == 1
    # One keep per change (the quiet look keeps nothing), and the final checkpoint's too.
    assert [k.number for k in kept.keeps] == [1, 2, 3]
    assert kept.keeps[1].previous == commit_of(1)
    restart = kept.create_inputs[1].workspace
    assert restart is not None and not restart.rewind
    assert (restart.ref, restart.commit) == (f"refs/overnight/{spec.run_id}/2", commit_of(2))
    assert kept.create_inputs[0].workspace is None
    view = status.workspace
    assert view is not None and view.base == BASE and view.problem is None
    assert [k.outcome for k in view.kept] == ["pushed"] * 3


async def test_a_keep_over_the_limit_is_said_and_the_run_goes_on(
    client: Client, kept: WorkspaceWorld
) -> None:
    kept.outcomes = {1: "over_limit"}
    kept.script(1, [progress(note("b")), exits(3)])
    kept.script(2, [exits(0, final=note("done"))])
    async with started_run(client, kept, make_spec(keep_workspace=True)) as handle:
        result = await handle.result()
        status = await status_of(handle)
    assert result.outcome == "finished"
    assert status.workspace is not None and "over_limit" in (status.workspace.problem or "x")
    # Nothing was kept to start from: the restart is from the checkpoint alone.
    assert kept.create_inputs[1].workspace is None


async def test_a_run_that_keeps_nothing_never_keeps_and_refuses_a_rewind(
    client: Client, kept: WorkspaceWorld
) -> None:
    kept.script(1, [progress(note("b")), *[Quiet()] * 20])
    async with started_run(client, kept, make_spec()) as handle:
        await eventually(lambda: status_of(handle), lambda s: s.checkpoint_bytes > 0)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("rewind", 1, result_type=str)
        assert "does not keep its workspace" in str(refused.value.cause)
        assert (await status_of(handle)).workspace is None
    assert kept.keeps == []


async def test_rewind_goes_on_from_checkpoint_n_and_its_workspace(
    client: Client, kept: WorkspaceWorld
) -> None:
    steps = [progress(note(f"step {k + 1}", f"step {k} done")) for k in range(1, 6)]
    kept.script(1, [*steps, *[Quiet()] * 50])
    kept.script(2, [Quiet(), exits(0)])
    async with started_run(client, kept, make_spec(keep_workspace=True)) as handle:
        await eventually(lambda: status_of(handle), lambda s: len(s.workspace.kept) == 5)
        for bad, why in [(9, "no checkpoint 9"), (0, "whole number"), ("2", "whole number")]:
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await handle.execute_update("rewind", bad, result_type=str)
            assert why in str(refused.value.cause)
        said = await handle.execute_update("rewind", 2, result_type=str)
        assert "rewinding to checkpoint 2" in said
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "workspace_rewound")
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 2, 0)
    rewound = kept.create_inputs[1].workspace
    assert rewound is not None and rewound.rewind and rewound.commit == commit_of(2)
    # Checkpoint 2's checkpoint is the run's again (the agent's second attempt starts there).
    assert result.checkpoint == note("step 3", "step 2 done")
    assert status.workspace is not None and status.workspace.rewinds == 1
    assert "rewound to checkpoint 2" in status.restarts[-1].reason
