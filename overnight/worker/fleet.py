"""The worker's own part of overnight's metrics.

- The `overnight_runs{state}` gauge: open runs in each state, counted in the namespace's
  visibility (the `OvernightState` search attribute the runs keep), so it is right whichever
  worker holds which run and survives every worker restart. Every worker serving metrics
  reports the whole namespace (take `max` across workers, as the dashboard does); each look
  costs one `CountWorkflowExecutions` per open state.
- Counters start at 0 for every value their attributes can take: Prometheus's `increase()`
  and `rate()` miss the first count of a series that appears already at 1.
"""

from __future__ import annotations

import asyncio
import logging
from typing import get_args

from temporalio.client import Client
from temporalio.common import MetricMeter
from temporalio.runtime import Runtime
from temporalio.service import RPCError

from overnight.core import metrics
from overnight.core.constants import SA_STATE, WORKFLOW_TYPE
from overnight.core.models import RunState

# How often the worker counts (the dashboard's resolution for runs by state).
FLEET_EVERY_SECONDS = 15.0
ENDED_STATES = frozenset({"finished", "cancelled", "failed"})
logger = logging.getLogger(__name__)


def open_states() -> list[str]:
    """Every state a run that has not ended can be in (new states join by themselves)."""
    return [state for state in get_args(RunState) if state not in ENDED_STATES]


def state_query(state: str) -> str:
    return (
        f"WorkflowType = '{WORKFLOW_TYPE}' AND ExecutionStatus = 'Running' "
        f"AND {SA_STATE} = '{state}'"
    )


def start_counters_at_zero(client: Client, task_queue: str) -> None:
    """Make every series of overnight's counters exist at 0, with the attributes the SDK's
    workflow and activity meters give them (namespace, task queue, workflow or activity type).
    """
    from workflows import metrics as run_metrics  # the roof may import workflows

    meter = client_meter(client)
    run = {"namespace": client.namespace, "task_queue": task_queue, "workflow_type": WORKFLOW_TYPE}
    zeros: list[tuple[metrics.Metric, dict[str, str]]] = []
    zeros += [(metrics.RUN_TRANSITIONS, run | {"state": state}) for state in get_args(RunState)]
    zeros += [
        (metrics.RESTARTS, run | {"cause": cause, "counted": run_metrics.counted(cause)})
        for cause in run_metrics.RESTART_CAUSES
    ]
    zeros += [(metrics.LEASE_EXTENSIONS, run | {"outcome": o}) for o in run_metrics.LEASE_OUTCOMES]
    zeros += [(metrics.LEASE_END_WAKES, run | {"outcome": o}) for o in run_metrics.WAKE_OUTCOMES]
    zeros += [(metrics.SPEND, run | {"kind": kind}) for kind in ("sandbox", "model")]
    activity = {"namespace": client.namespace, "task_queue": task_queue}
    zeros += [
        (metrics.SANDBOX_ENDS, activity | {"activity_type": f"{verb}_sandbox", "how": how})
        for verb, how in (("pause", "paused"), ("stop", "stopped"))
    ]
    for metric, attributes in zeros:
        meter.create_counter(metric.name, metric.description, metric.unit or None).add(
            0, attributes
        )


def client_meter(client: Client) -> MetricMeter:
    """The meter of the runtime `client` was connected with (no-op without metrics)."""
    runtime = client.service_client.config.runtime or Runtime.default()
    return runtime.metric_meter


async def report_runs_by_state(
    client: Client, *, every_seconds: float = FLEET_EVERY_SECONDS
) -> None:
    """Set the gauge every `every_seconds`, until cancelled. A failed count (the search
    attribute not registered, the server away) is logged once and tried again next time."""
    gauge = client_meter(client).create_gauge(metrics.RUNS.name, metrics.RUNS.description)
    warned = False
    while True:
        try:
            for state in open_states():
                counted = await client.count_workflows(state_query(state))
                gauge.set(counted.count, {"state": state, "namespace": client.namespace})
            warned = False
        except RPCError as error:
            if not warned:
                logger.warning("runs by state not counted: %s", error)
                warned = True
        await asyncio.sleep(every_seconds)
