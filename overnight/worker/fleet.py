"""The `overnight_runs{state}` gauge: open runs in each state, counted in the namespace's
visibility (the `OvernightState` search attribute the runs keep), so it is right whichever
worker holds which run and survives every worker restart.

Every worker serving metrics reports the whole namespace (take `max` across workers, as the
dashboard does); each look costs one `CountWorkflowExecutions` per open state.
"""

from __future__ import annotations

import asyncio
import logging
from typing import get_args

from temporalio.client import Client
from temporalio.common import MetricMeter
from temporalio.runtime import Runtime
from temporalio.service import RPCError

from overnight import metrics
from overnight.constants import SA_STATE, WORKFLOW_TYPE
from overnight.models import RunState

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
