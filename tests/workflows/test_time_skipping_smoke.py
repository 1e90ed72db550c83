"""The time-skipping test server from the installed wheel runs an hour-long workflow at once."""

from __future__ import annotations

import time
import uuid

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from tests.workflows.trivial_workflows import Nap, NapReport, Sleeper


async def test_an_hour_long_sleep_completes_in_seconds_on_the_time_skipping_server(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    client = time_skipping_env.client
    task_queue = f"sleeper-{uuid.uuid4()}"
    wall_started = time.monotonic()
    async with Worker(client, task_queue=task_queue, workflows=[Sleeper]):
        report = await client.execute_workflow(
            Sleeper.run,
            Nap(name="smoke", hours=1),
            id=f"sleeper-{uuid.uuid4()}",
            task_queue=task_queue,
        )
    assert isinstance(report, NapReport)  # the pydantic converter brought the model back
    assert report.name == "smoke"
    assert report.slept_seconds >= 3600
    assert time.monotonic() - wall_started < 30
