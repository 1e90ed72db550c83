"""A workflow worker in a process of its own, for the SIGKILL test:
`python -m tests.admission.workflow_worker ADDRESS TASK_QUEUE STATE_DIR`.

It runs AgentRun and the admission workflow, with their local activities, and no remote
activity (those run on the test's own worker), so killing it kills workflow tasks only: the
test shows the admission's places live in Temporal, not in a worker. Its admission limits
come from its environment (`OVERNIGHT_MAX_RUNS`), as a real worker's do. Prints `ready`.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from activities.worker_activities import WorkerActivities
from fakes.provider import short_agents
from overnight.core.grants import Grants
from overnight.worker.workflow_runner import shared_module_runner
from workflows.admission_run import OvernightAdmission
from workflows.agent_run import AgentRun
from workflows.notify_run import NotifyRun


async def main(address: str, queue: str, state_dir: str) -> None:
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    activities = WorkerActivities(
        client, providers={"local": short_agents(Path(state_dir))}, grants=Grants()
    )
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[AgentRun, NotifyRun, OvernightAdmission],
        activities=activities.all(),
        no_remote_activities=True,
        # Its runs move to the next worker a second after it dies, not after the default 10 s.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        workflow_runner=shared_module_runner(),
    )
    async with worker:
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
