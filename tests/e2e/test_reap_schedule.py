"""The hourly reap as a Temporal Schedule the worker sets up, on the real dev server: made once
however many workers start (idempotent), it starts `OvernightReap`, whose activity deletes a
finished run's crashed-attempt sandbox once its retention has ended."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import (
    Client,
    ScheduleActionStartWorkflow,
    ScheduleOverlapPolicy,
    WorkflowExecutionStatus,
)
from temporalio.service import RPCError

from activities.models import ReapSummary
from activities.providers.local.provider import LocalProvider
from overnight.cli import client as api
from overnight.core.constants import LABEL_KEEP_UNTIL
from overnight.core.retention import label_value
from overnight.worker.reap_schedule import REAP_EVERY, REAP_SCHEDULE_ID, ensure_reap_schedule
from overnight.worker.runner import serve
from tests.e2e.test_retention import crashing_spec
from tests.live import granted, new_run_id
from tests.waits import CAP
from workflows.reap_run import REAP_WORKFLOW


async def _delete_schedule(client: Client) -> None:
    with contextlib.suppress(RPCError):
        await client.get_schedule_handle(REAP_SCHEDULE_ID).delete()


async def _reap_runs(client: Client) -> list[tuple[str, str]]:
    query = f"WorkflowType = '{REAP_WORKFLOW}'"
    return [(w.id, w.run_id) async for w in client.list_workflows(query)]


@pytest.mark.timeout(120)
async def test_workers_set_up_the_hourly_reap_once_and_it_deletes_what_retention_let_go(
    dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    await _delete_schedule(dev_client)
    try:
        # A worker started to make it (as `python worker.py` and `overnight dev` are) does.
        ready, stop = asyncio.Event(), asyncio.Event()
        worker = asyncio.create_task(
            serve(
                dev_client,
                task_queue=f"{task_queue}-w",
                ready=ready,
                stop=stop,
                reap_schedule=True,
                grants=granted(),
            )
        )
        waiter = asyncio.create_task(ready.wait())
        await asyncio.wait({worker, waiter}, timeout=CAP, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if worker.done():
            worker.result()  # raises why the worker could not start
        assert ready.is_set()
        stop.set()
        await asyncio.wait_for(worker, timeout=CAP)
        made_by_worker = await dev_client.get_schedule_handle(REAP_SCHEDULE_ID).describe()
        assert made_by_worker.schedule.spec.intervals[0].every == REAP_EVERY
        assert isinstance(made_by_worker.schedule.action, ScheduleActionStartWorkflow)
        assert made_by_worker.schedule.action.task_queue == f"{task_queue}-w"
        await _delete_schedule(dev_client)

        # Two workers starting at once, and one more later: one schedule.
        made = await asyncio.gather(*(ensure_reap_schedule(dev_client, task_queue) for _ in "ab"))
        assert sorted(made) == [False, True]
        assert await ensure_reap_schedule(dev_client, "another-queue") is False
        ids = [s.id async for s in await dev_client.list_schedules()]
        assert ids.count(REAP_SCHEDULE_ID) == 1
        described = await dev_client.get_schedule_handle(REAP_SCHEDULE_ID).describe()
        action = described.schedule.action
        assert isinstance(action, ScheduleActionStartWorkflow)
        assert (action.workflow, action.task_queue) == (REAP_WORKFLOW, task_queue)
        assert [i.every for i in described.schedule.spec.intervals] == [REAP_EVERY]
        assert described.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
        assert not described.schedule.state.paused

        # A run that crashed once and finished keeps its crashed attempt's sandbox paused;
        # its retention ends (its label moved to the past).
        run_id = new_run_id("reapsched")
        runs.append(run_id)
        await api.start_run(dev_client, crashing_spec(run_id, tmp_path), task_queue=task_queue)
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=60)
        assert (result.outcome, result.attempts) == ("finished", 2)
        provider = LocalProvider()
        kept = f"{run_id}-1"
        assert (await provider.sandbox(kept)).state == "paused"
        ended = datetime.now(UTC) - timedelta(minutes=1)
        await provider.set_labels(kept, {LABEL_KEEP_UNTIL: label_value(ended)})

        # The schedule fires (now, rather than within the hour): the worker's reap takes it.
        before = set(await _reap_runs(dev_client))
        await dev_client.get_schedule_handle(REAP_SCHEDULE_ID).trigger()
        deadline = asyncio.get_running_loop().time() + 60
        while not (fired := set(await _reap_runs(dev_client)) - before):
            assert asyncio.get_running_loop().time() < deadline, "the schedule did not fire"
            await asyncio.sleep(0.2)
        [(workflow_id, fired_run)] = fired
        assert workflow_id.startswith(f"{REAP_SCHEDULE_ID}-")  # the schedule adds the time
        handle = dev_client.get_workflow_handle(
            workflow_id, run_id=fired_run, result_type=ReapSummary
        )
        summary = await asyncio.wait_for(handle.result(), timeout=60)
        described_run = await handle.describe()
        assert described_run.status == WorkflowExecutionStatus.COMPLETED
        assert summary.deleted >= 1 and summary.freed_bytes > 0
        line = next(line for line in summary.lines if kept in line)
        assert line.startswith(f"local sandbox {kept} of {run_id}: deleted: its retention ended")
        assert (await provider.sandbox(kept)).state == "stopped"
    finally:
        await _delete_schedule(dev_client)
