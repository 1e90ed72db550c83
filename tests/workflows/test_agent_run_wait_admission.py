"""A run paused for a long wait gives its admission place back and queues again before it wakes,
on the time-skipping server: two runs (each with a `FakeWorld` and a worker of its own) share a
pool of one place, whose `OvernightAdmission` workflow runs beside the first."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta

from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.admission import AdmissionActivities
from activities.models import ActivityName, SpecCheck, SpecCheckInput
from overnight.admission import PLACES_QUERY, AdmissionTerms
from overnight.admission import admission_workflow_id as pool_id
from overnight.models import RunResult, RunSpec, RunStatus
from tests.workflows.fakes import FakeWorld, Quiet, exits, progress
from tests.workflows.harness import Handle, eventually, keep_history, make_spec, status_of
from tests.workflows.test_agent_run_talk import kit_checkpoint
from workflows.admission import OvernightAdmission
from workflows.admission_queue import Places
from workflows.agent_run import AgentRun
from workflows.notify_run import NotifyRun


class PoolWorld(FakeWorld):
    """A FakeWorld whose worker puts every run in one pool (`check_spec`'s admission terms)."""

    def __init__(self, terms: AdmissionTerms, task_queue: str) -> None:
        super().__init__()
        self.terms = terms
        self.task_queue = task_queue

    @activity.defn(name=ActivityName.CHECK_SPEC)
    async def check_spec(self, request: SpecCheckInput) -> SpecCheck:
        self.spec_checks.append(request)
        return SpecCheck(refusals=[], admission=self.terms)


@asynccontextmanager
async def pool_of_one(client: Client, *worlds_of: str) -> AsyncIterator[dict[str, PoolWorld]]:
    """One world (and worker, on a task queue of its own) per name; the pool's admission
    workflow runs on the first's queue, and lets one run in at a time."""
    queues = {name: f"pool-{name}-{uuid.uuid4().hex[:8]}" for name in worlds_of}
    home = queues[worlds_of[0]]
    terms = AdmissionTerms(workflow_id=pool_id(home), task_queue=home, max_runs=1)
    worlds = {name: PoolWorld(terms, queues[name]) for name in worlds_of}
    async with AsyncExitStack() as stack:
        for world in worlds.values():
            await stack.enter_async_context(
                Worker(
                    client,
                    task_queue=world.task_queue,
                    workflows=[AgentRun, NotifyRun, OvernightAdmission],
                    activities=[
                        *world.activities(),
                        *AdmissionActivities(client).all(),
                    ],
                    max_heartbeat_throttle_interval=timedelta(milliseconds=100),
                    default_heartbeat_throttle_interval=timedelta(milliseconds=100),
                )
            )
        yield worlds


async def start(client: Client, world: PoolWorld, spec: RunSpec) -> Handle:
    handle: Handle = await client.start_workflow(
        "AgentRun", spec, id=spec.run_id, task_queue=world.task_queue, result_type=RunResult
    )
    return handle


async def places(client: Client, world: PoolWorld) -> Places:
    handle = client.get_workflow_handle(world.terms.workflow_id)
    return await handle.query(PLACES_QUERY, result_type=Places)


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
            after = await places(client, a)
            await keep_history(waiter, "wait_gave_place_back")
        finally:
            for handle in (waiter, other):
                await _terminate(handle)

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


async def _terminate(handle: Handle | None) -> None:
    with contextlib.suppress(RPCError):  # already closed
        if handle is not None:
            await handle.terminate(reason="test over")
