"""Cancelling a run, by the `cancel` signal or by Temporal cancellation, in each of its states.

Every way out copies the final checkpoint and leaves no sandbox running (stopped, or paused when
`keep_sandboxes`, or paused for a look when its attempt failed); a cleanup step that fails never
hides the outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sized

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.testing import WorkflowEnvironment

from fakes.activities import FakeWorld, Hangs, exits, progress
from overnight.core.models import Budget, RunStatus
from tests.workflows.harness import (
    Handle,
    eventually,
    keep_history,
    make_spec,
    started_run,
    status_of,
    until_idle,
    until_state,
)


async def test_cancel_while_starting_stops_the_new_sandbox_once_it_is_made(
    client: Client, world: FakeWorld
) -> None:
    hold = world.hold_create(1, shielded=True)
    async with started_run(client, world, make_spec()) as handle:
        await hold.started.wait()
        starting = await status_of(handle)
        await handle.signal("cancel", "wrong repo")
        # Made only once the run's cancel of the create has reached it (see Hold).
        await asyncio.wait_for(hold.cancel_seen.wait(), timeout=30)
        hold.release.set()
        result = await handle.result()

    assert starting.state == "starting"
    assert result.outcome == "cancelled"
    assert world.log == ["create box-1", "stop box-1"]
    assert world.observed == []  # the agent was never watched: the cancel came first


async def test_cancel_while_running_copies_the_checkpoint_and_stops_the_sandbox(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1")])
    async with started_run(client, world, make_spec()) as handle:
        await eventually(lambda: status_of(handle), lambda s: s.checkpoint_bytes > 0)
        await until_idle(world)
        await handle.signal("cancel", "going home")
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "cancel_signal_running")

    assert (result.outcome, result.checkpoint, result.restarts) == ("cancelled", "cp-1", 0)
    assert world.log == ["create box-1", "stop box-1"]
    assert status.state == "cancelled"


@pytest.mark.parametrize("args", [[42], [{"why": "bored"}], ["done", "extra argument"]])
async def test_cancel_with_an_odd_payload_still_cancels(
    client: Client, world: FakeWorld, args: list[object]
) -> None:
    world.script(1, [progress("cp-1")])
    async with started_run(client, world, make_spec()) as handle:
        await eventually(lambda: status_of(handle), lambda s: s.checkpoint_bytes > 0)
        await until_idle(world)
        await handle.signal("cancel", args=args)
        result = await handle.result()

    assert (result.outcome, result.checkpoint) == ("cancelled", "cp-1")


async def test_cancel_with_keep_sandboxes_pauses_instead_of_stopping(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(1)])
    world.script(2, [progress("cp-2")])
    async with started_run(client, world, make_spec(keep_sandboxes=True)) as handle:
        await eventually(lambda: status_of(handle), lambda s: s.checkpoint_bytes == 4)
        await eventually(lambda: status_of(handle), lambda s: s.attempt == 2)
        await until_idle(world)
        await handle.signal("cancel")
        result = await handle.result()

    assert result.outcome == "cancelled"
    assert world.stopped == []
    assert (world.state_of(1), world.state_of(2)) == ("paused", "paused")


async def test_cancel_while_waiting_for_a_person_ends_the_run_and_keeps_its_sandbox_for_a_look(
    client: Client, world: FakeWorld
) -> None:
    # The attempt that used up the budget was paused for a look: cancelling ends the run, and
    # the sandbox stays paused for `keep_failed_days` (tests/workflows/test_agent_run_retention.py).
    world.script(1, [progress("cp-1"), exits(1)])
    async with started_run(client, world, make_spec(budget=Budget(max_restarts=0))) as handle:
        await until_state(handle, "needs_attention")
        await until_idle(world)
        await handle.signal("cancel", "not worth it")
        result = await handle.result()
        await keep_history(handle, "cancel_signal_needs_attention")

    assert (result.outcome, result.checkpoint) == ("cancelled", "cp-1")
    assert world.log == ["create box-1", "pause box-1"]
    assert world.state_of(1) == "paused" and "box-1" in world.kept_until


async def test_cancel_while_waiting_for_a_person_keeps_the_paused_sandbox_if_asked(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [exits(1)])
    spec = make_spec(budget=Budget(max_restarts=0), keep_sandboxes=True)
    async with started_run(client, world, spec) as handle:
        await until_state(handle, "needs_attention")
        await until_idle(world)
        await handle.signal("cancel")
        result = await handle.result()

    assert result.outcome == "cancelled"
    assert world.state_of(1) == "paused"
    assert world.stopped == []


async def test_cancel_during_a_long_look_interrupts_it(
    private_env: WorkflowEnvironment, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), Hangs()])
    async with started_run(private_env.client, world, make_spec()) as handle:
        await eventually(lambda: _length(world.observed), lambda n: n >= 2)
        await handle.signal("cancel")
        result = await handle.result()
        await eventually(lambda: _value(world.cancelled_observes), lambda n: n == 1)

    assert (result.outcome, result.checkpoint) == ("cancelled", "cp-1")
    assert world.log == ["create box-1", "stop box-1"]


async def test_temporal_cancellation_while_watching_cleans_up_and_ends_as_canceled(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1")])
    async with started_run(client, world, make_spec()) as handle:
        await eventually(lambda: status_of(handle), lambda s: s.checkpoint_bytes > 0)
        await until_idle(world)
        await handle.cancel()
        status = await ended_canceled(handle)
        await keep_history(handle, "temporal_cancel_canceled")

    assert status.state == "cancelled"
    assert world.log == ["create box-1", "stop box-1"]


async def test_temporal_cancellation_during_a_long_look_cleans_up(
    private_env: WorkflowEnvironment, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), Hangs()])
    async with started_run(private_env.client, world, make_spec()) as handle:
        await eventually(lambda: _length(world.observed), lambda n: n >= 2)
        await handle.cancel()
        status = await ended_canceled(handle)

    assert (status.state, status.checkpoint_bytes) == ("cancelled", len("cp-1"))
    assert world.log == ["create box-1", "stop box-1"]


async def test_temporal_cancellation_while_waiting_for_a_person_ends_as_canceled(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [exits(1)])
    async with started_run(client, world, make_spec(budget=Budget(max_restarts=0))) as handle:
        await until_state(handle, "needs_attention")
        await until_idle(world)
        await handle.cancel()
        status = await ended_canceled(handle)

    assert status.state == "cancelled"
    assert world.log == ["create box-1", "pause box-1"]
    assert world.state_of(1) == "paused" and "box-1" in world.kept_until


async def test_temporal_cancellation_during_sandbox_creation_cleans_up(
    client: Client, world: FakeWorld
) -> None:
    hold = world.hold_create(1)
    async with started_run(client, world, make_spec()) as handle:
        await hold.started.wait()
        await handle.cancel()
        status = await ended_canceled(handle)

    assert hold.cancelled
    assert status.state == "cancelled"
    assert world.state_of(1) == "stopped"


async def test_cancel_signal_interrupts_a_long_sandbox_creation(
    client: Client, world: FakeWorld
) -> None:
    hold = world.hold_create(1)
    async with started_run(client, world, make_spec()) as handle:
        await hold.started.wait()
        await handle.signal("cancel", "changed my mind")
        result = await handle.result()

    assert hold.cancelled
    assert result.outcome == "cancelled"
    assert world.state_of(1) == "stopped"
    assert world.running() == []


async def test_cancel_while_a_restart_sets_the_old_sandbox_aside_makes_no_new_one(
    client: Client, world: FakeWorld
) -> None:
    # The cancel lands while the restart pauses sandbox 1; the create of sandbox 2 comes after.
    # Before, it was started and cancelled at once in one workflow task: the never-started
    # activity's handle raised a bare CancelledError, and the run failed with it.
    world.script(1, [exits(1)])
    hold = world.hold_pause("box-1")
    async with started_run(client, world, make_spec()) as handle:
        await hold.started.wait()
        await handle.signal("cancel", "test over")
        hold.release.set()
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "cancel_before_create")

    assert (result.outcome, status.state) == ("cancelled", "cancelled")
    assert world.log == ["create box-1", "pause box-1"]  # no sandbox 2 was made
    assert world.running() == []


async def test_failed_stop_does_not_hide_that_the_agent_finished(
    client: Client, world: FakeWorld
) -> None:
    world.stop_error = ApplicationError("provider is down", type="ServiceUnavailable")
    world.script(1, [progress("cp-1"), exits(0, final="cp-final")])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()

    assert (result.outcome, result.checkpoint) == ("finished", "cp-final")
    assert world.stopped == []


async def test_failed_stop_does_not_hide_a_cancel(client: Client, world: FakeWorld) -> None:
    world.stop_error = ApplicationError("provider is down", type="ServiceUnavailable")
    world.script(1, [progress("cp-1")])
    async with started_run(client, world, make_spec()) as handle:
        await eventually(lambda: status_of(handle), lambda s: s.checkpoint_bytes > 0)
        await until_idle(world)
        await handle.signal("cancel")
        result = await handle.result()

    assert (result.outcome, result.checkpoint) == ("cancelled", "cp-1")


async def test_failed_pause_does_not_stop_a_restart(client: Client, world: FakeWorld) -> None:
    world.pause_error = ApplicationError("provider is down", type="ServiceUnavailable")
    world.script(1, [progress("cp-1"), exits(1)])
    world.script(2, [exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()

    assert world.creates()[1].checkpoint == "cp-1"
    assert (result.outcome, result.restarts) == ("finished", 1)
    # The sandbox that could not be paused is stopped on the way out.
    assert world.state_of(1) == "stopped"


async def _length(items: Sized) -> int:
    return len(items)


async def _value(number: int) -> int:
    return number


async def ended_canceled(handle: Handle) -> RunStatus:
    """The run ended as Canceled (what the Web UI's status filter finds), after its cleanup;
    its last status says `cancelled`."""
    with pytest.raises(WorkflowFailureError) as ended:
        await handle.result()
    assert isinstance(ended.value.cause, CancelledError), ended.value.cause
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    return await status_of(handle)
