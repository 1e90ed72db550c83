"""The worker runner: serves until told to stop, shuts down cleanly, and `run_dev` brings up
the dev server with the overnight worker polling, stopping only the server it started."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from pathlib import Path

import yaml
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from overnight.core.constants import TASK_QUEUE
from overnight.worker.devserver import DevServer, server_answers, ui_answers
from overnight.worker.runner import run_dev, run_worker
from tests.conftest import DEV_CONFIG_FILE, free_ports
from tests.waits import CAP
from tests.workflows.trivial_workflows import Echo


async def wait_for(event: asyncio.Event, task: asyncio.Task[None], seconds: float = 60) -> None:
    """Wait for `event`, but surface the task's error at once if it fails first."""
    waiter = asyncio.create_task(event.wait())
    done, _ = await asyncio.wait({waiter, task}, timeout=seconds, return_when="FIRST_COMPLETED")
    waiter.cancel()
    if task in done:
        task.result()
    assert event.is_set(), f"not ready within {seconds}s"


async def pollers(client: Client, task_queue: str) -> int:
    described = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return len(described.pollers)


async def test_worker_serves_until_stop_is_set_then_shuts_down(dev_client: Client) -> None:
    task_queue = f"runner-{uuid.uuid4()}"
    worker = Worker(dev_client, task_queue=task_queue, workflows=[Echo])
    ready, stop = asyncio.Event(), asyncio.Event()
    serving = asyncio.create_task(run_worker(worker, ready=ready, stop=stop))
    await wait_for(ready, serving)
    result = await dev_client.execute_workflow(
        Echo.run, "hi", id=f"echo-{uuid.uuid4()}", task_queue=task_queue
    )
    assert result == "echo hi"
    stop.set()
    await asyncio.wait_for(serving, timeout=CAP)
    assert worker.is_shutdown


async def test_cancelling_the_runner_shuts_the_worker_down(dev_client: Client) -> None:
    worker = Worker(dev_client, task_queue=f"runner-{uuid.uuid4()}", workflows=[Echo])
    ready = asyncio.Event()
    serving = asyncio.create_task(run_worker(worker, ready=ready))
    await wait_for(ready, serving)
    serving.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await serving
    assert worker.is_shutdown


async def test_run_dev_serves_the_overnight_queue_and_stops_the_server_it_started(
    tmp_path: Path,
) -> None:
    port, ui_port = free_ports(2)
    settings = yaml.safe_load(DEV_CONFIG_FILE.read_text())
    settings |= {
        "port": port,
        "ui_port": ui_port,
        "db_file": str(tmp_path / "dev.sqlite"),
        "log_file": str(tmp_path / "dev-server.log"),
    }
    config_file = tmp_path / "temporal-dev.yaml"
    config_file.write_text(yaml.safe_dump(settings))
    address = f"127.0.0.1:{port}"

    ready, stop = asyncio.Event(), asyncio.Event()
    running = asyncio.create_task(run_dev(config_file, ready=ready, stop=stop))
    try:
        await wait_for(ready, running)
        assert ui_answers(f"http://127.0.0.1:{ui_port}")
        client = await Client.connect(address, data_converter=pydantic_data_converter)
        deadline = time.monotonic() + CAP
        while await pollers(client, TASK_QUEUE) == 0:
            assert time.monotonic() < deadline, "no worker polls the overnight task queue"
            await asyncio.sleep(0.2)
    finally:
        stop.set()
        await asyncio.wait_for(running, timeout=60)
    assert not await server_answers(address, "default")


async def test_run_dev_leaves_a_reused_server_running(
    dev_server: DevServer, tmp_path: Path
) -> None:
    config_file = tmp_path / "temporal-dev.yaml"
    config_file.write_text(yaml.safe_dump(dev_server.config.model_dump(mode="json")))
    ready, stop = asyncio.Event(), asyncio.Event()
    running = asyncio.create_task(
        run_dev(config_file, task_queue=f"reuse-{uuid.uuid4()}", ready=ready, stop=stop)
    )
    try:
        await wait_for(ready, running)
    finally:
        stop.set()
        await asyncio.wait_for(running, timeout=60)
    assert await server_answers(dev_server.address, dev_server.namespace)
