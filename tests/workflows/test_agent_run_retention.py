"""What a run leaves at its end: the sandboxes of its failed attempts stay paused for a look for
`keep_failed_days`, labelled with when they may go; every other sandbox is stopped.

The history `retention_kept` is recorded from the first test (behind `RETENTION_PATCH`); the
histories recorded before it (`crash`, `cancel_signal_needs_attention`, ...) still replay
stopping them (tests/workflows/test_replay.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from fakes.activities import FakeWorld, exits, progress
from tests.workflows.harness import (
    Handle,
    eventually,
    keep_history,
    make_spec,
    started_run,
    until_idle,
)
from workflows.patches import KEEP_WOKEN_ASIDE_PATCH, RETENTION_PATCH


async def _attempts(world: FakeWorld) -> int:
    return len(world.creates())


async def _markers(handle: Handle) -> str:
    """The run's markers' details (the ids of the patches it has), as text."""
    history = await handle.fetch_history()
    return "".join(
        payload.data.decode()
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        for details in event.marker_recorded_event_attributes.details.values()
        for payload in details.payloads
    )


async def _closed_at(handle: Handle) -> datetime:
    history = await handle.fetch_history()
    last = history.events[-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    return last.event_time.ToDatetime().astimezone()


async def test_a_finished_run_keeps_its_crashed_attempts_sandbox_paused_until_its_retention_ends(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(1)])
    world.script(2, [progress("cp-2"), exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()
        closed = await _closed_at(handle)
        markers = await _markers(handle)
        await keep_history(handle, "retention_kept")

    assert (result.outcome, result.attempts) == ("finished", 2)
    # The finished attempt's sandbox is stopped (its disk freed); the crashed one stays paused,
    # marked with the moment its retention (3 days by default) ends.
    assert world.log == ["create box-1", "pause box-1", "create box-2", "stop box-2"]
    assert (world.state_of(1), world.state_of(2)) == ("paused", "stopped")
    assert list(world.kept_until) == ["box-1"]
    kept = world.kept_until["box-1"] - closed
    assert timedelta(days=3) - timedelta(minutes=1) <= kept <= timedelta(days=3)
    assert RETENTION_PATCH in markers


async def test_keep_failed_days_0_stops_the_crashed_attempts_sandbox_at_the_end(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(1)])
    world.script(2, [exits(0)])
    async with started_run(client, world, make_spec(keep_failed_days=0)) as handle:
        await handle.result()

    assert (world.state_of(1), world.state_of(2)) == ("stopped", "stopped")
    assert world.log[-1] == "stop box-1" and world.kept_until == {}


async def test_keep_sandboxes_keeps_every_sandbox_paused_with_no_end(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(1)])
    world.script(2, [exits(0)])
    async with started_run(client, world, make_spec(keep_sandboxes=True)) as handle:
        await handle.result()

    # Kept as the spec asked: `overnight reap --paused` deletes them, not the retention.
    assert (world.state_of(1), world.state_of(2)) == ("paused", "paused")
    assert world.stopped == [] and world.kept_until == {}


async def test_a_cancelled_run_keeps_its_crashed_attempts_sandbox_and_stops_the_current_one(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(1)])
    world.script(2, [progress("cp-2")])
    async with started_run(client, world, make_spec(keep_failed_days=7)) as handle:
        await eventually(lambda: _attempts(world), lambda n: n == 2)
        await until_idle(world)
        await handle.signal("cancel", "enough")
        result = await handle.result()
        closed = await _closed_at(handle)

    assert result.outcome == "cancelled"
    assert (world.state_of(1), world.state_of(2)) == ("paused", "stopped")
    kept = world.kept_until["box-1"] - closed
    assert timedelta(days=7) - timedelta(minutes=1) <= kept <= timedelta(days=7)


async def test_a_crashed_attempts_sandbox_woken_by_a_read_is_paused_and_kept_at_the_end(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(1)])
    world.script(2, [progress("cp-2")])
    async with started_run(client, world, make_spec()) as handle:
        await eventually(lambda: _attempts(world), lambda n: n == 2)
        await until_idle(world)
        # A follower's read met box-1's pause, and Runtime woke it for the read.
        world.box(1).state = "running"
        await handle.signal("cancel", "enough")
        await handle.result()
        markers = await _markers(handle)
        await keep_history(handle, "retention_woken_kept")

    # Still a failed attempt's sandbox, kept for a look: paused again, not stopped as a
    # half-made one (which loses the evidence).
    assert (world.state_of(1), world.state_of(2)) == ("paused", "stopped")
    assert "box-1" in world.kept_until and "box-1" not in world.stopped
    assert KEEP_WOKEN_ASIDE_PATCH in markers
