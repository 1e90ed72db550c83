"""Snapshot recovery on the time-skipping server: captures on request and after checkpoint
changes, the interval between them, restarts from the latest ready snapshot (or the
checkpoint when there is none), failed captures that are no restart, and cleanup."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client

from fakes.activities import Quiet, exits, note, progress
from tests.workflows.harness import keep_history, make_spec, started_run, status_of
from tests.workflows.snapshot_world import SnapshotWorld

EVERY = 300


@pytest.fixture
def snaps() -> SnapshotWorld:
    return SnapshotWorld()


def asks(request: int, step: str) -> Any:
    """A checkpoint write by an agent that asks for snapshot `request` (`snapshot_here()`)."""
    return progress(json.dumps({"next": step, "notes": [], "snapshot_request": request}))


def snapshot_spec(**overrides: Any) -> Any:
    return make_spec(
        recovery="snapshot", snapshot_every_seconds=EVERY, stall_seconds=3600, **overrides
    )


async def test_a_snapshot_is_taken_when_the_agent_asks_and_deleted_when_the_run_ends(
    client: Client, snaps: SnapshotWorld
) -> None:
    snaps.script(1, [asks(1, "warm cache built"), Quiet(), exits(0, final=note("done"))])
    async with started_run(client, snaps, snapshot_spec()) as handle:
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "snapshot_on_request")
    assert result.outcome == "finished" and result.restarts == 0
    assert [t.request for _, t in snaps.takes] == [1]
    assert snaps.takes[0][1].mode == "disk"
    assert status.snapshots_taken == 1 and status.snapshot_pause_seconds == 0.5
    # Deleted at the end (no keep_sandboxes): no snapshot is shown as still there.
    assert snaps.deleted == ["snap-1"] and status.latest_snapshot is None


async def test_captures_are_at_least_the_interval_apart(
    client: Client, snaps: SnapshotWorld
) -> None:
    snaps.script(1, [asks(1, "a"), asks(2, "b"), *[Quiet()] * 6, exits(0, final=note("done"))])
    async with started_run(client, snaps, snapshot_spec()) as handle:
        await handle.result()
    (first, one), (second, two) = snaps.takes
    assert (one.request, two.request) == (1, 2)
    assert second - first >= timedelta(seconds=EVERY)
    # The older snapshot is deleted once a newer one is ready only past the two kept.
    assert two.delete_ids == []


async def test_a_restart_uses_the_latest_snapshot_and_the_checkpoint_when_there_is_none(
    client: Client, snaps: SnapshotWorld
) -> None:
    snaps.script(1, [progress(note("step 2", "step 1 done")), exits(3)])
    snaps.script(2, [asks(1, "step 3"), Quiet(), exits(4)])
    snaps.script(3, [exits(0, final=note("done"))])
    async with started_run(client, snaps, snapshot_spec()) as handle:
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "snapshot_restore")
    assert result.outcome == "finished" and result.restarts == 2
    first_restart, second_restart = snaps.create_inputs[1], snaps.create_inputs[2]
    # No snapshot yet: clone + checkpoint, as in checkpoint mode.
    assert first_restart.restore is None
    assert first_restart.checkpoint == note("step 2", "step 1 done")
    assert second_restart.restore is not None
    assert second_restart.restore.snapshot_id == "snap-1"
    assert second_restart.restore.adopt_start_key == f"{status.run_id}-2-0"
    assert snaps.restores == [(3, "snap-1")]
    assert status.restored_from == "snap-1"


async def test_a_failed_capture_is_no_restart_and_is_tried_again_after_the_interval(
    client: Client, snaps: SnapshotWorld
) -> None:
    snaps.failing = {1}
    snaps.script(1, [asks(1, "a"), *[Quiet()] * 6, exits(0, final=note("done"))])
    async with started_run(client, snaps, snapshot_spec()) as handle:
        result = await handle.result()
        status = await status_of(handle)
    assert result.restarts == 0 and len(snaps.creates()) == 1
    (first, one), (second, two) = snaps.takes
    assert (one.request, two.request) == (1, 1)
    assert second - first >= timedelta(seconds=EVERY)
    assert status.snapshot_failures == 1 and status.snapshots_taken == 1
    assert status.snapshot_error is None


async def test_automatic_captures_follow_checkpoint_changes_when_declared_safe(
    client: Client, snaps: SnapshotWorld
) -> None:
    snaps.script(
        1,
        [
            progress(note("b", "a done")),
            progress(note("c", "b done")),
            *[Quiet()] * 4,
            progress(note("d", "c done")),
            *[Quiet()] * 4,
            exits(0, final=note("done")),
        ],
    )
    spec = snapshot_spec(snapshot_on_checkpoint=True)
    async with started_run(client, snaps, spec) as handle:
        result = await handle.result()
        status = await status_of(handle)
    assert result.outcome == "finished"
    assert [t.request for _, t in snaps.takes] == [0, 0, 0]
    # The third capture deletes the first: the latest two are kept.
    assert snaps.takes[2][1].delete_ids == ["snap-1"]
    assert snaps.deleted == ["snap-1", "snap-2", "snap-3"]
    assert status.snapshots_taken == 3


async def test_checkpoint_recovery_never_snapshots(client: Client, snaps: SnapshotWorld) -> None:
    snaps.script(1, [asks(1, "a"), exits(0, final=note("done"))])
    spec = make_spec(snapshot_on_checkpoint=True)
    async with started_run(client, snaps, spec) as handle:
        await handle.result()
    assert snaps.takes == [] and snaps.create_inputs[0].restore is None
