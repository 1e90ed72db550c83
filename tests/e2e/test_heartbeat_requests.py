"""On a real server, with the worker's settings: an activity inside `auto_heartbeat` sends no
heartbeat at its start and then one every heartbeat interval (0.8 x its heartbeat timeout),
each one request: the SDK's throttle neither holds one back nor adds any. Requests counted
with the SDK's own request counter, as the benchmarks do; heartbeats counted as the activity
makes them (an activity interceptor), per attempt: on a loaded machine a late heartbeat can
time an attempt out and the retry makes its own, so the count is relative to what was made,
not a number of seconds."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig
from temporalio.worker import (
    ActivityInboundInterceptor,
    ActivityOutboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    Worker,
)

from activities.heartbeat import HEARTBEAT_SHARE, auto_heartbeat
from overnight.worker.devserver import DevServer
from overnight.worker.runner import HEARTBEAT_THROTTLE

HEARTBEAT_TIMEOUT = timedelta(seconds=2.5)  # one heartbeat per 2 s
INTERVAL = HEARTBEAT_TIMEOUT.total_seconds() * HEARTBEAT_SHARE
RUNS_FOR = 7.0  # heartbeats at 2, 4 and 6 s on an idle machine


@dataclass
class Beats:
    """When each attempt began and the heartbeats it made (monotonic seconds)."""

    started: dict[int, float] = field(default_factory=dict)
    made: dict[int, list[float]] = field(default_factory=dict)


class CountHeartbeats(Interceptor):
    def __init__(self, beats: Beats) -> None:
        self.beats = beats

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next, self.beats)


class _Inbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, beats: Beats) -> None:
        super().__init__(next)
        self.beats = beats

    def init(self, outbound: ActivityOutboundInterceptor) -> None:
        super().init(_Outbound(outbound, self.beats))

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        self.beats.started[activity.info().attempt] = time.monotonic()
        return await super().execute_activity(input)


class _Outbound(ActivityOutboundInterceptor):
    def __init__(self, next: ActivityOutboundInterceptor, beats: Beats) -> None:
        super().__init__(next)
        self.beats = beats

    def heartbeat(self, *details: Any) -> None:
        self.beats.made.setdefault(activity.info().attempt, []).append(time.monotonic())
        super().heartbeat(*details)


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
            start_to_close_timeout=timedelta(seconds=120),
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
    beats = Beats()
    async with Worker(
        client,
        task_queue=queue,
        workflows=[LongStep],
        activities=[long_step],
        interceptors=[CountHeartbeats(beats)],
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,  # the worker's own setting
    ):
        await client.execute_workflow("LongStep", id=queue, task_queue=queue)
    sent = sum(
        update.value
        for update in metrics.retrieve_updates()
        if update.metric.name == "temporal_request"
        and update.attributes.get("operation") == "RecordActivityTaskHeartbeat"
    )
    made = sum(len(times) for times in beats.made.values())
    print(f"attempts {sorted(beats.started)}, heartbeats made {made}, requests sent {sent}")

    # None at an attempt's start, then one per interval at most (load only makes them later).
    for attempt, started in beats.started.items():
        times = [started, *beats.made.get(attempt, [])]
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        assert all(gap >= INTERVAL - 0.05 for gap in gaps), (attempt, gaps)
    # The attempt that finished ran for RUNS_FOR, more than three intervals: it heartbeat.
    assert beats.made.get(max(beats.started), []), beats
    # Each heartbeat made is one request: none held back, none added.
    assert sent == made
