"""On a real server, with the worker's settings: an activity inside `auto_heartbeat` sends no
heartbeat at its start and then exactly one request per heartbeat interval (0.8 x its
heartbeat timeout): the SDK's throttle neither holds one back nor adds any. Counted with the
SDK's own request counter, as the benchmarks do."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig
from temporalio.worker import Worker

from activities.heartbeat import auto_heartbeat
from overnight.worker.devserver import DevServer
from overnight.worker.runner import HEARTBEAT_THROTTLE

HEARTBEAT_TIMEOUT = timedelta(seconds=2.5)  # one heartbeat per 2 s
RUNS_FOR = 7.0  # heartbeats at 2, 4 and 6 s


@activity.defn(name="long_step")
async def long_step() -> None:
    async with auto_heartbeat():
        await asyncio.sleep(RUNS_FOR)


@workflow.defn(name="LongStep")
class LongStep:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity(
            "long_step",
            start_to_close_timeout=timedelta(seconds=60),
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
        )


async def test_each_heartbeat_is_one_request_and_none_at_the_start(dev_server: DevServer) -> None:
    metrics = MetricBuffer(10_000)
    client = await Client.connect(
        dev_server.address,
        namespace=dev_server.namespace,
        runtime=Runtime(telemetry=TelemetryConfig(metrics=metrics)),
    )
    queue = f"heartbeats-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[LongStep],
        activities=[long_step],
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,  # the worker's own setting
    ):
        await client.execute_workflow("LongStep", id=queue, task_queue=queue)
    sent = sum(
        update.value
        for update in metrics.retrieve_updates()
        if update.metric.name == "temporal_request"
        and update.attributes.get("operation") == "RecordActivityTaskHeartbeat"
    )
    assert sent == 3
