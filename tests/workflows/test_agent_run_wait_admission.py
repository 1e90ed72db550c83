"""A run paused for a long wait gives its admission place back and queues again before it wakes,
on the time-skipping server: two runs (each with a `FakeWorld` and a worker of its own) share a
pool of one place, whose `OvernightAdmission` workflow runs beside the first."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from fakes.activities import Quiet, exits, progress
from overnight.core.models import RunStatus
from tests.workflows.harness import Handle, eventually, keep_history, make_spec, status_of
from tests.workflows.pool_world import places, pool_of_one, start, terminate
from tests.workflows.test_agent_run_talk import kit_checkpoint


async def test_a_long_wait_gives_the_place_back_and_queues_again_to_wake(
    client: Client, time_skipping_env: WorkflowEnvironment
) -> None:
    env = time_skipping_env
    now = await env.get_current_time()
    wait = {"id": "w1-x", "until": (now + timedelta(hours=1)).isoformat(), "reason": "window"}
    async with pool_of_one(client, "a", "b") as worlds:
        a, b = worlds["a"], worlds["b"]
        a.script(1, [progress(kit_checkpoint(1, wait=wait)), Quiet(), exits(0)])
        # The other run works quietly (no checkpoint) through the hour: no stall.
        first, second = make_spec(), make_spec(stall_seconds=4 * 3600)
        waiter = await start(client, a, first)
        other: Handle | None = None
        try:
            await eventually(
                lambda: status_of(waiter), lambda s: bool(s.talk and s.talk.waiting_until)
            )
            # The waiter paused for an hour: its place goes to the next run at once.
            other = await start(client, b, second)
            await eventually(lambda: places(client, a), lambda p: second.run_id in p.holding)
            during = await places(client, a)
            # The hour passes while the other run still holds the place: the waiter queues,
            # its sandbox paused, and is not woken.
            await env.sleep(timedelta(hours=1, minutes=1))
            queued = await eventually(lambda: status_of(waiter), lambda s: s.state == "queued")
            box_while_queued = a.state_of(1)
            wakes_while_queued = list(a.wakes)
            # The other run ends: the waiter is let in, woken, and finishes.
            await other.cancel()
            result = await waiter.result()
            # Its own release is checked (it ended) before its place is freed.
            after = await eventually(lambda: places(client, a), lambda p: not p.holding)
            await keep_history(waiter, "wait_gave_place_back")
        finally:
            for handle in (waiter, other):
                await terminate(handle)

    assert first.run_id not in during.holding and during.waiting == []
    assert queued.sandbox_id == "box-1" and box_while_queued == "paused"
    assert wakes_while_queued == []
    assert a.wakes == ["box-1"] and [(x.request_id, x.answer) for x in a.answers] == [
        ("w1-x", "woken")
    ]
    assert (result.outcome, result.restarts, result.attempts) == ("finished", 0, 1)
    assert after.holding == {} and after.waiting == []
    assert after.most_held == 1 and after.admitted_total == 3
    assert b.creates() and len(b.sandboxes) == 1


def _waiting(status: RunStatus) -> bool:
    return status.talk is not None and status.talk.waiting_until is not None
