"""A stall seen coming, in the workflow (time skipped): a run begun with the marker
`progress-is-checkpoints` wakes at half its stall threshold and its card says the stall is
coming; its restart comes at the threshold as before; its last progress stays the last
checkpoint the agent wrote, not the new sandbox's start. History `stall_seen_coming`."""

from __future__ import annotations

from datetime import timedelta

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from fakes.activities import FakeWorld, exits, progress
from tests.workflows.harness import eventually, keep_history, make_spec, started_run, status_of


async def test_the_card_says_the_stall_is_coming_and_last_progress_stays_the_checkpoint(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    world.script(1, [progress("cp-1")])  # then quiet for ever
    world.script(2, [exits(0)])  # finishes at once, writing nothing
    async with started_run(client, world, make_spec()) as handle:
        progressed = await eventually(lambda: status_of(handle), lambda s: s.checkpoint_bytes > 0)
        checkpointed_at = progressed.last_progress_at
        assert checkpointed_at is not None
        await time_skipping_env.sleep(timedelta(minutes=8))
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        midway = await status_of(handle)
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "stall_seen_coming")

    assert "- **stall watch** no checkpoint for 7 min: stalls at 15 min" in (
        metadata.current_details
    ), metadata.current_details
    assert midway.stalls_at == checkpointed_at + timedelta(minutes=15)
    [record] = status.restarts
    assert record.reason == "agent stalled 15 min"
    assert 900 <= (record.at - checkpointed_at).total_seconds() < 901
    assert result.outcome == "finished"
    assert status.last_progress_at == checkpointed_at  # not sandbox 2's start
