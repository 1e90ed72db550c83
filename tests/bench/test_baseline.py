"""The benchmarks' baseline (`NaiveAgentRun`, the seed's loop) runs to its end on overnight's
own activities: a run whose agent exits 0 stops its sandbox and finishes, and answers its
status query after (a bench reads every run's status once the runs are done)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from temporalio.client import Client

from bench.baseline import BASELINE_WORKFLOW, NaiveStatus
from bench.baseline_worker import serve_baseline
from fakes.provider import short_agents
from tests.admission.pool import short_spec
from tests.waits import CAP


async def test_a_baseline_run_whose_agent_exits_0_finishes_and_answers_its_status(
    dev_client: Client, tmp_path: Path
) -> None:
    queue = f"baseline-{uuid.uuid4().hex[:8]}"
    boxes = tmp_path / "boxes"
    ready, stop = asyncio.Event(), asyncio.Event()
    worker = asyncio.create_task(
        serve_baseline(
            dev_client,
            task_queue=queue,
            ready=ready,
            stop=stop,
            providers={"local": short_agents(boxes, life=0.2)},
        )
    )
    try:
        await asyncio.wait_for(ready.wait(), timeout=CAP)
        spec = short_spec(tmp_path, "baseline", poll_seconds=1)
        handle = await dev_client.start_workflow(
            BASELINE_WORKFLOW, spec, id=spec.run_id, task_queue=queue, result_type=NaiveStatus
        )
        done = await asyncio.wait_for(handle.result(), timeout=60)
        assert done.finished
        status = await handle.query("status", result_type=NaiveStatus)
        assert status.finished and status.restarts == []
        boxes_left = await short_agents(boxes).list({}, include_stopped=False)
        assert boxes_left == []  # its sandbox was stopped at the end
    finally:
        stop.set()
        await asyncio.wait_for(worker, timeout=60)
