"""Whatever an agent writes into its checkpoint, AgentRun's workflow code never raises on it:
the run goes on (a bad checkpoint refused with a reason, the last good one kept), `status`
answers, notifications go out, and `cancel` still ends it cleanly.

The bad checkpoints come two ways: as the read activity sends them now (what the text says,
read in the worker with limits: `activities.sandbox_base.checkpoints.checkpoint_from`), and as a
worker from before sent them (the text alone, as in recorded histories), which the workflow then
reads itself, with the same limits.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest
from temporalio.client import Client

from activities.models import CheckpointRead
from activities.providers.protocol import FileRead
from activities.sandbox_base.checkpoints import checkpoint_from
from fakes.activities import (
    FakeWorld,
    Quiet,
    Writes,
    checkpoint_ok,
    exits,
    note,
    progress,
)
from overnight.core.notify_spec import Webhook
from tests.waits import CAP
from tests.workflows.harness import eventually, make_spec, started_run, status_of, until_idle
from tests.workflows.snapshot_world import SnapshotWorld

# 200 KB, under the default 256 KiB cap: json.loads raises RecursionError on it.
BOMB = "[" * 100_000 + "]" * 100_000
GOOD = note("step 2", "step 1 done")


def as_read_now(text: str) -> CheckpointRead:
    """The read as the worker's activity sends it today."""
    data = text.encode()
    return checkpoint_from(FileRead(status="ok", size=len(data), data=data), None)


def as_read_before(text: str) -> CheckpointRead:
    """The read as a worker from before sent it (no facts: the workflow reads the text)."""
    return checkpoint_ok(text)


READS = pytest.mark.parametrize(
    "read", [as_read_now, as_read_before], ids=["read-in-the-worker", "recorded-before"]
)


@READS
async def test_a_checkpoint_nested_too_deep_is_refused_and_cancel_still_ends_the_run(
    client: Client, world: FakeWorld, read: Callable[[str], CheckpointRead]
) -> None:
    world.script(1, [progress(GOOD), Writes(read(BOMB)), Quiet()])
    async with started_run(client, world, make_spec()) as handle:
        refused = await eventually(
            lambda: status_of(handle), lambda s: s.checkpoint_rejected is not None
        )
        await until_idle(world)
        await handle.signal("cancel", "enough")
        result = await asyncio.wait_for(handle.result(), timeout=CAP)

    assert refused.checkpoint_rejected == (
        "checkpoint could not be read: it nests deeper than 64 levels"
    )
    assert refused.state == "running"
    assert refused.checkpoint_summary is not None
    assert refused.checkpoint_summary.next == "step 2"
    assert (result.outcome, result.checkpoint) == ("cancelled", GOOD)
    assert world.running() == []


@READS
async def test_a_deep_checkpoint_as_the_first_one_is_refused_too(
    client: Client, world: FakeWorld, read: Callable[[str], CheckpointRead]
) -> None:
    # Nothing before it was JSON: "stopped parsing as JSON" would not catch it.
    world.script(1, [Writes(read(BOMB)), exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        result = await asyncio.wait_for(handle.result(), timeout=CAP)
        status = await status_of(handle)
    assert (result.outcome, result.checkpoint) == ("finished", None)
    assert status.checkpoint_rejected is not None and "deeper than 64" in status.checkpoint_rejected


@READS
async def test_a_lone_surrogate_in_the_checkpoint_never_breaks_the_status_or_a_notification(
    client: Client, world: FakeWorld, read: Callable[[str], CheckpointRead]
) -> None:
    # Valid UTF-8 and valid JSON, but "\ud800" parses to a character no payload can carry.
    odd = '{"next": "\\ud800 step 3", "notes": ["\\udfff"]}'
    world.script(1, [Writes(read(odd)), exits(0)])
    spec = make_spec(notify=[Webhook(url="http://127.0.0.1:9/hook")])
    async with started_run(client, world, spec) as handle:
        result = await asyncio.wait_for(handle.result(), timeout=CAP)
        status = await status_of(handle)
    assert (result.outcome, result.checkpoint) == ("finished", odd)
    assert status.checkpoint_summary is not None
    assert (status.checkpoint_summary.next, status.checkpoint_summary.last_note) == (
        "? step 3",
        "?",
    )
    assert [n.next_step for n in world.notifications] == ["? step 3"]


@READS
async def test_a_snapshot_request_in_a_checkpoint_nested_too_deep_takes_no_snapshot(
    client: Client, read: Callable[[str], CheckpointRead]
) -> None:
    snaps = SnapshotWorld()
    asked = json.dumps({"next": "warm", "notes": [], "snapshot_request": 1})
    deep = '{"next": "x", "snapshot_request": 2, "deep": ' + BOMB + "}"
    snaps.script(1, [Writes(read(asked)), Writes(read(deep)), Quiet()])
    spec = make_spec(recovery="snapshot", snapshot_every_seconds=60, stall_seconds=3600)
    async with started_run(client, snaps, spec) as handle:
        refused = await eventually(
            lambda: status_of(handle), lambda s: s.checkpoint_rejected is not None
        )
        await until_idle(snaps)
        await handle.signal("cancel")
        result = await asyncio.wait_for(handle.result(), timeout=CAP)
    assert refused.checkpoint_rejected is not None
    assert "deeper than 64" in refused.checkpoint_rejected
    assert [t.request for _, t in snaps.takes] == [1]
    assert (result.outcome, result.checkpoint) == ("cancelled", asked)
