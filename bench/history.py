"""Metric 3, history cost: a healthy supervised run on the time-skipping server, both ways.

One agent checkpoints every 5 minutes for 6 hours and exits 0. overnight's `AgentRun` and the
baseline's `NaiveAgentRun` each supervise it with mocked activities (`bench.history_world`);
afterwards every run of each workflow's continue-as-new chain is fetched and counted
(`bench.actions`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.runtime import (
    LoggingConfig,
    MetricBuffer,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from bench.actions import HEARTBEAT_SENT, HistoryCost, count_history
from bench.baseline import BASELINE_WORKFLOW, NaiveAgentRun
from bench.history_world import HealthyAgentWorld
from bench.report import Row
from bench.scale import HEARTBEAT_REQUESTS
from overnight.core.constants import SEARCH_ATTRIBUTE_TYPES, WORKFLOW_TYPE
from overnight.core.models import RunSpec
from overnight.worker import binaries
from overnight.worker.devserver import indexed_value_type
from workflows.agent_run import AgentRun

EVENT_LIMIT = 10_240
METRIC_BUFFER_SIZE = 100_000
CHECKPOINT_EVERY_SECONDS = 300.0
# A measurement takes about 1 s per supervised hour; one past this has hung (see `_bounded`).
ATTEMPT_BASE_SECONDS = 20.0
ATTEMPT_SECONDS_PER_HOUR = 10.0
ATTEMPTS = 3

T = TypeVar("T")


def healthy_spec(run_id: str, hours: float) -> RunSpec:
    return RunSpec(
        run_id=run_id,
        repo="/nowhere/app.git",
        agent_dir="/nowhere/agent",
        command="python3 /workspace/agent/main.py --resume /workspace/checkpoint.json",
        poll_seconds=60,
        # A healthy run: no sandbox time limit or hours budget ends it early.
        sandbox_timeout_seconds=(hours + 2) * 3600,
    )


async def measure_history(*, hours: float) -> tuple[list[Row], dict[str, Any]]:
    started = time.monotonic()
    (overnight, our_beats, baseline, their_beats), hung = await _bounded(
        lambda: _both_ways(hours), hours
    )
    ours = count_history(overnight, heartbeats=our_beats)
    theirs = count_history(baseline, heartbeats=their_beats)
    without_heartbeat = count_history(overnight, heartbeat_timeout_override=0)
    details = {
        "hours": hours,
        "checkpoint_every_seconds": CHECKPOINT_EVERY_SECONDS,
        "wall_seconds": round(time.monotonic() - started, 1),
        "hung_attempts": hung,
        "overnight": _describe(ours, hours),
        "baseline": _describe(theirs, hours),
        "overnight_if_observe_did_not_heartbeat": _describe(without_heartbeat, hours),
    }
    return _rows(ours, theirs, without_heartbeat, hours), details


async def overnight_history_cost(hours: float, converter: DataConverter) -> HistoryCost:
    """overnight's cost of one healthy supervised run of `hours` with `converter` (the codec
    benchmark compares it encrypted and not)."""

    async def once() -> tuple[list[list[HistoryEvent]], int]:
        async with _time_skipping(converter) as (env, metrics):
            return await _supervise(env, WORKFLOW_TYPE, hours, metrics)

    (events, beats), _ = await _bounded(once, hours)
    return count_history(events, heartbeats=beats)


async def _both_ways(
    hours: float,
) -> tuple[list[list[HistoryEvent]], int, list[list[HistoryEvent]], int]:
    async with _time_skipping(pydantic_data_converter) as (env, metrics):
        overnight, our_beats = await _supervise(env, WORKFLOW_TYPE, hours, metrics)
        baseline, their_beats = await _supervise(env, BASELINE_WORKFLOW, hours, metrics)
    return overnight, our_beats, baseline, their_beats


async def _bounded(measure: Callable[[], Awaitable[T]], hours: float) -> tuple[T, int]:
    """`measure` in a fresh test server, bounded; the result and how many tries hung first.
    Under load the time-skipping server stalls about one measurement in 60 for good (seen at
    four test processes: nothing moves, the run never ends); what it counts is events, which
    a second server counts the same."""
    for hung in range(ATTEMPTS):
        try:
            bound = ATTEMPT_BASE_SECONDS + ATTEMPT_SECONDS_PER_HOUR * hours
            return await asyncio.wait_for(measure(), bound), hung
        except TimeoutError:
            if hung == ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


@asynccontextmanager
async def _time_skipping(
    converter: DataConverter,
) -> AsyncIterator[tuple[WorkflowEnvironment, MetricBuffer]]:
    metrics = MetricBuffer(METRIC_BUFFER_SIZE)
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=converter,
        test_server_existing_path=str(binaries.test_server_path()),
        runtime=_quiet_runtime(metrics),
    )
    try:
        await _register_search_attributes(env.client)
        yield env, metrics
    finally:
        await env.shutdown()


def _quiet_runtime(metrics: MetricBuffer) -> Runtime:
    """The SDK's own warnings about the test server's version say nothing about the bench;
    its metrics count the heartbeat requests the worker sends."""
    quiet = TelemetryFilter(core_level="ERROR", other_level="ERROR")
    return Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter=quiet), metrics=metrics))


def _heartbeat_requests(metrics: MetricBuffer) -> int:
    """RecordActivityTaskHeartbeat requests sent since the last call (the SDK's own count)."""
    name, operation = HEARTBEAT_REQUESTS
    return int(
        sum(
            update.value
            for update in metrics.retrieve_updates()
            if update.metric.name == name and update.attributes.get("operation") == operation
        )
    )


async def _register_search_attributes(client: Client) -> None:
    kinds = {name: indexed_value_type(kind) for name, kind in SEARCH_ATTRIBUTE_TYPES.items()}
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(namespace=client.namespace, search_attributes=kinds)
    )


async def _supervise(
    env: WorkflowEnvironment, workflow_type: str, hours: float, metrics: MetricBuffer
) -> tuple[list[list[HistoryEvent]], int]:
    """Run one healthy supervised run to its end; the events of every run of its chain, and
    the heartbeat requests its worker sent."""
    _heartbeat_requests(metrics)  # what came before is not this run's
    world = HealthyAgentWorld(env, hours=hours, checkpoint_every=CHECKPOINT_EVERY_SECONDS)
    queue = f"history-{uuid.uuid4().hex[:8]}"
    run_id = f"history-{workflow_type.lower()}-{uuid.uuid4().hex[:6]}"
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[AgentRun, NaiveAgentRun],
        activities=world.activities(),
        # The mock's heartbeats (each made in server time, on the real activity's schedule)
        # must reach the server before it moves the clock on.
        max_heartbeat_throttle_interval=timedelta(0),
    ):
        handle = await env.client.start_workflow(
            workflow_type, healthy_spec(run_id, hours), id=run_id, task_queue=queue
        )
        await handle.result()
    sent = _heartbeat_requests(metrics)
    if sent != world.heartbeats:
        raise RuntimeError(f"{world.heartbeats} heartbeats made but {sent} requests counted")
    return await _chain(env.client, run_id, handle.first_execution_run_id), sent


async def _chain(client: Client, workflow_id: str, run_id: str | None) -> list[list[HistoryEvent]]:
    runs: list[list[HistoryEvent]] = []
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        events = list(history.events)
        runs.append(events)
        last = events[-1]
        run_id = None
        if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return runs


def _describe(cost: HistoryCost, hours: float) -> dict[str, Any]:
    described = asdict(cost)
    described["actions_in_history"] = cost.actions_in_history
    described["total_actions"] = cost.total_actions
    described["events_per_hour"] = round(cost.events / hours, 1)
    described["actions_per_hour"] = round(cost.total_actions / hours, 1)
    described["history_bytes_per_hour"] = round(cost.history_bytes / hours)
    return described


def _rows(ours: HistoryCost, theirs: HistoryCost, lean: HistoryCost, hours: float) -> list[Row]:
    def per_hour(value: int) -> float:
        return round(value / hours, 1)

    return [
        Row(
            "history events / supervised hour",
            "events",
            per_hour(theirs.events),
            per_hour(ours.events),
            "",
        ),
        Row(
            "billable actions / supervised hour",
            "actions",
            per_hour(theirs.total_actions),
            per_hour(ours.total_actions),
            "ratio <= 0.33",
            ratio_at_most=1 / 3,
            note=(
                f"incl. heartbeats sent {per_hour(ours.actions.get(HEARTBEAT_SENT, 0))}/h "
                f"(estimate {per_hour(ours.heartbeats_estimated)}/h); "
                f"without observe heartbeats {per_hour(lean.total_actions)}/h"
            ),
        ),
        Row(
            "largest history (one run)",
            "events",
            theirs.max_events_in_a_run,
            ours.max_events_in_a_run,
            f"<= {EVENT_LIMIT}",
            at_most=EVENT_LIMIT,
        ),
    ]
