"""Admission on the real dev server: the pool's `OvernightAdmission` workflow holds its places,
runs wait in `queued` with nothing made, and go in by priority, fairly across owners; a
SIGKILLed worker loses no place, and a holder terminated without giving its place back has it
taken back. The sandboxes are `fakes.provider.short_agents`: agents that
exit 0 after a moment, kept in files so that every worker process sees them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError
from temporalio.worker import Worker

from activities.worker_activities import WorkerActivities
from fakes.provider import most_at_once, read_events, short_agents
from overnight.cli import client as api
from overnight.core.admission import (
    ADMISSION_WORKFLOW,
    ADMITTED_SIGNAL,
    AdmissionSettings,
    admission_workflow_id,
)
from overnight.core.errors import OvernightError
from overnight.core.grants import Grants
from overnight.core.models import RunStatus
from overnight.worker.devserver import DevServer
from tests.admission.pool import (
    drained,
    places,
    short_pool,
    short_spec,
    start_all,
    start_subprocess_worker,
    wait_for,
)
from tests.full_forms import sized
from tests.workflows.harness import HISTORIES, RECORD_ENV, keep_history
from workflows.admission_run import AdmissionInput

# Histories of the admission workflow (replayed by tests/admission/test_admission_replay.py).
ADMISSION_HISTORIES = HISTORIES / "admission"


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "agent"
    folder.mkdir()
    return folder


# Six times the pool in whole AgentRuns through one in-process worker: 60 on a pool of 10 in
# the suite, 300 on a pool of 50 in its full form (OVERNIGHT_FULL_TESTS=1; about a minute on a
# quiet 2-core machine, up to four on a loaded one). Its cost is the runs' (about 0.8 CPU
# seconds each, two thirds of it the dev server's).
POOL = sized(10, 50)
RUNS = 6 * POOL


@pytest.mark.long
@pytest.mark.heavy
@pytest.mark.timeout(900)
async def test_six_times_the_pool_in_runs_never_hold_more_sandboxes_than_the_pool(
    dev_client: Client, tmp_path: Path, agent_dir: Path
) -> None:
    boxes = tmp_path / "boxes"
    settings = AdmissionSettings(max_runs=POOL)
    async with short_pool(dev_client, boxes, settings, life=1.0) as queue:
        specs = [short_spec(agent_dir, "many") for _ in range(RUNS)]
        handles = await start_all(dev_client, specs, queue)
        # The last ones wait their turn, visibly: the status and the search attribute.
        last = specs[-1].run_id
        queued = await wait_for(lambda: _status(dev_client, last, "queued"), 240, "last queued")
        assert queued.sandbox_id is None and queued.hours_used < 0.01
        await wait_for(
            lambda: _listed_state(dev_client, last, "queued"), 120, "queued in `overnight list`"
        )
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 540)
        assert {r.outcome for r in results} == {"finished"}
        pool = await drained(dev_client, queue)
    events = read_events(boxes)
    assert sum(e.up for e in events) == RUNS, "every run made its one sandbox"
    most = most_at_once(events)
    assert most <= POOL, f"{most} sandboxes at once on a pool of {POOL}"
    assert most >= POOL // 5, f"only {most} at once: the runs did not overlap"
    assert pool.holding == {} and pool.waiting == []
    assert pool.admitted_total == RUNS and pool.most_held == POOL


async def test_priority_1_runs_go_in_before_queued_priority_5_runs(
    dev_client: Client, tmp_path: Path, agent_dir: Path
) -> None:
    boxes = tmp_path / "boxes"
    async with short_pool(dev_client, boxes, AdmissionSettings(max_runs=2)) as queue:
        blockers = await _hold_every_place(dev_client, agent_dir, queue, boxes, 2)
        low = [short_spec(agent_dir, "low", priority=5) for _ in range(4)]
        low_handles = await start_all(dev_client, low, queue)
        await wait_for(lambda: _waiting(dev_client, queue, 4), 30, "the low runs queued")
        high = [short_spec(agent_dir, "high", priority=1) for _ in range(4)]
        high_handles = await start_all(dev_client, high, queue)
        await wait_for(lambda: _waiting(dev_client, queue, 8), 30, "the high runs queued")
        await _let_go(dev_client, blockers)
        await asyncio.wait_for(
            asyncio.gather(*(h.result() for h in [*low_handles, *high_handles])), 120
        )
        await keep_history(low_handles[0], "admission_queued")
        # Temporal's own task priority follows the spec's (tasks of urgent runs go first).
        described = await high_handles[0].describe()
        assert described.raw_description.workflow_execution_info.priority.priority_key == 1
        let_in = {s.run_id: await _admitted_at(dev_client, s.run_id) for s in [*low, *high]}
    assert max(let_in[s.run_id] for s in high) < min(let_in[s.run_id] for s in low)


async def test_a_run_cancelled_while_queued_makes_nothing_and_leaves_the_queue(
    dev_client: Client, tmp_path: Path, agent_dir: Path
) -> None:
    boxes = tmp_path / "boxes"
    async with short_pool(dev_client, boxes, AdmissionSettings(max_runs=1)) as queue:
        (holder,) = await start_all(dev_client, [short_spec(agent_dir, "hold", seconds=60)], queue)
        # In before the other asks (started together, either may ask first).
        await wait_for(lambda: read_events(boxes), 30, "the holder's sandbox")
        (queued,) = await start_all(dev_client, [short_spec(agent_dir, "leave")], queue)
        await wait_for(lambda: _waiting(dev_client, queue, 1), 30, "the run queued")
        await api.cancel_run(dev_client, queued.id, reason="not tonight")
        result = await asyncio.wait_for(queued.result(), 30)
        assert result.outcome == "cancelled" and result.attempts == 0
        # Its release is checked (the run is out of the pool) before its turn goes.
        await wait_for(lambda: _waiting_none(dev_client, queue), 30, "the queue left")
        await keep_history(queued, "admission_cancelled_while_queued")
        await api.cancel_run(dev_client, holder.id)
        await asyncio.wait_for(holder.result(), 30)
    assert [e.run_id for e in read_events(boxes) if e.up] == [holder.id]


# team-a's flood of runs queued ahead of team-b's 3: 10 in the suite, 20 in full (each a whole
# run through a pool of 3). Either way first come, first served lets team-b in no sooner than
# 11th, after the flood.
FLOOD = sized(10, 20)


async def test_one_owners_flood_does_not_starve_another_owner(
    dev_client: Client, tmp_path: Path, agent_dir: Path
) -> None:
    boxes = tmp_path / "boxes"
    async with short_pool(dev_client, boxes, AdmissionSettings(max_runs=3)) as queue:
        blockers = await _hold_every_place(dev_client, agent_dir, queue, boxes, 3, "team-a")
        flood = [short_spec(agent_dir, "flood", owner="team-a", seconds=0.3) for _ in range(FLOOD)]
        handles = await start_all(dev_client, flood, queue)
        await wait_for(lambda: _waiting(dev_client, queue, FLOOD), 30, "the flood queued")
        few = [short_spec(agent_dir, "few", owner="team-b", seconds=0.3) for _ in range(3)]
        handles += await start_all(dev_client, few, queue)
        await wait_for(lambda: _waiting(dev_client, queue, FLOOD + 3), 30, "team-b queued")
        await _let_go(dev_client, blockers)
        await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 120)
        let_in = {s.run_id: await _admitted_at(dev_client, s.run_id) for s in [*flood, *few]}
    order = sorted(let_in, key=lambda run_id: let_in[run_id])
    places_of_b = [order.index(s.run_id) for s in few]
    # First come, first served would let team-b in after all of team-a's flood (11th to 13th
    # in the suite, 21st to 23rd in full); fairly, it takes every other place that frees from
    # the start.
    assert max(places_of_b) <= 6, f"team-b went in at {sorted(places_of_b)} of {FLOOD + 3}"


async def test_admission_survives_a_sigkilled_worker_with_no_place_lost(
    dev_client: Client, dev_server: DevServer, tmp_path: Path, agent_dir: Path
) -> None:
    boxes = tmp_path / "boxes"
    queue = f"admit-kill-{tmp_path.name[-6:]}".lower()
    async with _activity_worker(dev_client, queue, boxes):
        first = await start_subprocess_worker(dev_server.address, queue, boxes, max_runs=3)
        try:
            specs = [short_spec(agent_dir, "kill", seconds=0.8) for _ in range(12)]
            handles = await start_all(dev_client, specs, queue)
            await wait_for(lambda: len(read_events(boxes)) >= 5, 60, "runs going in")
        finally:
            first.send_signal(signal.SIGKILL)
            await first.wait()
        assert first.returncode == -signal.SIGKILL
        second = await start_subprocess_worker(dev_server.address, queue, boxes, max_runs=3)
        try:
            results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 120)
            pool = await drained(dev_client, queue)
        finally:
            second.terminate()
            await second.wait()
    assert {r.outcome for r in results} == {"finished"}
    events = read_events(boxes)
    assert sum(e.up for e in events) == 12
    assert most_at_once(events) <= 3
    assert pool.holding == {} and pool.waiting == [], "a place was lost or kept"
    assert pool.admitted_total == 12 and pool.taken_back_total == 0


async def test_a_terminated_holders_place_is_taken_back(
    dev_client: Client, tmp_path: Path, agent_dir: Path
) -> None:
    boxes = tmp_path / "boxes"
    settings = AdmissionSettings(max_runs=1, check_seconds=1)
    async with short_pool(dev_client, boxes, settings) as queue:
        (holder,) = await start_all(dev_client, [short_spec(agent_dir, "hold", seconds=600)], queue)
        await wait_for(lambda: read_events(boxes), 30, "the holder's sandbox")
        (waiter,) = await start_all(dev_client, [short_spec(agent_dir, "next")], queue)
        await wait_for(lambda: _waiting(dev_client, queue, 1), 30, "the next run queued")
        await holder.terminate("gone without giving its place back")
        result = await asyncio.wait_for(waiter.result(), 60)
        pool = await drained(dev_client, queue)
        # The terminated run's sandbox is reap's (docs/operator.md); stop it here.
        for box in await short_agents(boxes).list({}, include_stopped=False):
            await short_agents(boxes).stop(box.sandbox_id)
    assert result.outcome == "finished"
    assert pool.taken_back_total == 1 and pool.holding == {}


async def test_the_admission_continues_as_new_carrying_its_places(
    dev_client: Client, tmp_path: Path, agent_dir: Path
) -> None:
    boxes = tmp_path / "boxes"
    async with short_pool(dev_client, boxes, AdmissionSettings(max_runs=2)) as queue:
        # Started ahead of the runs, to continue as new after a few dozen events.
        first = await dev_client.start_workflow(
            ADMISSION_WORKFLOW,
            AdmissionInput(continue_after_events=40),
            id=admission_workflow_id(queue),
            task_queue=queue,
        )
        specs = [short_spec(agent_dir, "can") for _ in range(10)]
        handles = await start_all(dev_client, specs, queue)
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 120)
        pool = await drained(dev_client, queue)
        first_run = dev_client.get_workflow_handle(first.id, run_id=first.result_run_id)
        described = await first_run.describe()
        await _keep_admission_history(first_run, "continued_as_new")
        await _keep_admission_history(first, "carried_on")
    assert {r.outcome for r in results} == {"finished"}
    assert described.status == WorkflowExecutionStatus.CONTINUED_AS_NEW
    assert pool.admitted_total == 10 and pool.holding == {} and pool.waiting == []
    assert most_at_once(read_events(boxes)) <= 2


async def _keep_admission_history(handle: WorkflowHandle[Any, Any], name: str) -> None:
    if os.environ.get(RECORD_ENV) == "1":
        ADMISSION_HISTORIES.mkdir(exist_ok=True)
        history = await handle.fetch_history()
        (ADMISSION_HISTORIES / f"{name}.json").write_text(history.to_json())


async def _hold_every_place(
    client: Client, agent_dir: Path, queue: str, boxes: Path, count: int, owner: str = ""
) -> list[WorkflowHandle[Any, Any]]:
    """Runs that hold all `count` places until `_let_go`, so the rest queue in a known way."""
    specs = [short_spec(agent_dir, "block", seconds=120, owner=owner) for _ in range(count)]
    blockers = await start_all(client, specs, queue)
    await wait_for(lambda: len(read_events(boxes)) >= count, 30, "the blockers' sandboxes")
    return blockers


async def _let_go(client: Client, blockers: list[WorkflowHandle[Any, Any]]) -> None:
    for blocker in blockers:
        await api.cancel_run(client, blocker.id)
    await asyncio.wait_for(asyncio.gather(*(b.result() for b in blockers)), 60)


async def _admitted_at(client: Client, run_id: str) -> datetime:
    """When the pool told the run it was in (its `admitted` signal, in its history)."""
    async for event in client.get_workflow_handle(run_id).fetch_history_events():
        signaled = event.workflow_execution_signaled_event_attributes
        if event.HasField("workflow_execution_signaled_event_attributes"):
            if signaled.signal_name == ADMITTED_SIGNAL:
                return event.event_time.ToDatetime()
    raise AssertionError(f"{run_id} was never let in")


async def _status(client: Client, run_id: str, state: str) -> RunStatus | None:
    # Its first task not yet done, or its worker too loaded to answer in time: no answer yet.
    with contextlib.suppress(RPCError, OvernightError):
        status = await api.get_status(client, run_id)
        return status if status.state == state else None
    return None


async def _waiting(client: Client, queue: str, count: int) -> bool:
    with contextlib.suppress(Exception):
        return len((await places(client, queue)).waiting) >= count
    return False


async def _waiting_none(client: Client, queue: str) -> bool:
    return (await places(client, queue)).waiting == []


async def _listed_state(client: Client, run_id: str, state: str) -> bool:
    runs = await api.list_runs(client, open_only=True)
    return any(r.run_id == run_id and r.state == state for r in runs)


@contextlib.asynccontextmanager
async def _activity_worker(client: Client, queue: str, boxes: Path) -> AsyncIterator[None]:
    """The pool's remote activities, in this process (the workflows run in subprocesses)."""
    activities = WorkerActivities(
        client,
        providers={"local": short_agents(boxes)},
        grants=Grants(),
        admission=AdmissionSettings(max_runs=3),
    )
    async with Worker(client, task_queue=queue, activities=activities.all()):
        yield
