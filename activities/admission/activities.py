"""Admission's activities and the worker's admission settings (read from its environment here).

- `request_admission`: a run asks its pool's `OvernightAdmission` workflow for a place, by
  signal-with-start, so the first run of a pool starts it. Asked twice, it is answered twice
  and counted once (the workflow knows each holder by its workflow id).
- `closed_workflows`: which of the places' holders have closed (terminated, timed out, ...)
  without giving their place back, so the admission workflow takes their places back.
- `released_holders`: the same, and which are no overnight run at all, or (asked with the
  run's `in_pool` query) are in no pool: a `release` signal frees a place only then, since
  anyone may send one naming any run.
- `pool_settings` (a local activity): the limits and bounds of the worker running the
  admission workflow, which it takes instead of any signal's.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.common import Priority
from temporalio.service import RPCError, RPCStatusCode

from activities.errors import ErrorType, non_retryable
from activities.models import ActivityName
from activities.models.admission import (
    AdmissionAsk,
    HolderCheck,
    PoolSettingsInput,
    WorkflowIds,
)
from overnight.core.admission import (
    ADMISSION_WORKFLOW,
    IN_POOL_QUERY,
    REQUEST_SIGNAL,
    AdmissionSettings,
    key_fingerprint,
    parse_admission,
)
from overnight.core.constants import WORKFLOW_TYPE

# Describes in flight at once while looking for closed holders.
DESCRIBES_AT_ONCE = 16
# The admission workflow's own tasks go before the runs' when the task queue is backed up.
ADMISSION_PRIORITY = Priority(priority_key=1)
# A holder asked whether it is in a pool answers within this, or keeps its place for now: it
# is asked again (or found closed) a `check_seconds` later.
IN_POOL_QUERY_TIMEOUT = timedelta(seconds=10)


def worker_admission(environ: Mapping[str, str] | None = None) -> AdmissionSettings:
    """The admission settings in the worker's environment (or `environ`); `BadSetting` for
    one that cannot be read, so the worker does not start on a limit it misunderstands."""
    return parse_admission(os.environ if environ is None else environ)


def worker_key(environ: Mapping[str, str] | None = None) -> str | None:
    """The fingerprint of the worker's Runtime key (None: it has none)."""
    env = os.environ if environ is None else environ
    key = env.get("RUNTIME_API_KEY", "").strip()
    return key_fingerprint(key, env.get("RUNTIME_API_URL", "").strip()) if key else None


class AdmissionActivities:
    def __init__(self, client: Client | None, settings: AdmissionSettings | None = None) -> None:
        """`settings`: the pool's, as this worker has them (None: its environment's)."""
        self._client = client
        self._settings = worker_admission() if settings is None else settings

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.request_admission,
            self.closed_workflows,
            self.released_holders,
            self.pool_settings,
        ]

    def _connected(self) -> Client:
        if self._client is None:
            raise non_retryable(ErrorType.INVALID_REQUEST, "this worker has no Temporal client")
        return self._client

    @activity.defn(name=ActivityName.REQUEST_ADMISSION)
    async def request_admission(self, input: AdmissionAsk) -> None:
        terms = input.terms
        await self._connected().start_workflow(
            ADMISSION_WORKFLOW,
            id=terms.workflow_id,
            task_queue=terms.task_queue,
            start_signal=REQUEST_SIGNAL,
            start_signal_args=[input.request],
            priority=ADMISSION_PRIORITY,
            static_summary=f"admission of the runs on task queue {terms.task_queue}",
        )

    @activity.defn(name=ActivityName.CLOSED_WORKFLOWS)
    async def closed_workflows(self, input: WorkflowIds) -> WorkflowIds:
        client = self._connected()
        gate = asyncio.Semaphore(DESCRIBES_AT_ONCE)

        async def closed(workflow_id: str) -> bool:
            async with gate:
                try:
                    described = await client.get_workflow_handle(workflow_id).describe()
                except RPCError as err:
                    if err.status == RPCStatusCode.NOT_FOUND:
                        return True
                    raise
                return described.status != WorkflowExecutionStatus.RUNNING

        answers = await asyncio.gather(*(closed(i) for i in input.ids))
        return WorkflowIds(ids=[i for i, gone in zip(input.ids, answers, strict=True) if gone])

    @activity.defn(name=ActivityName.POOL_SETTINGS)
    async def pool_settings(self, input: PoolSettingsInput) -> AdmissionSettings:
        return self._settings

    @activity.defn(name=ActivityName.RELEASED_HOLDERS)
    async def released_holders(self, input: HolderCheck) -> WorkflowIds:
        client = self._connected()
        gate = asyncio.Semaphore(DESCRIBES_AT_ONCE)

        async def released(workflow_id: str) -> bool | None:
            async with gate:
                return await _out_of_pool(client, workflow_id, ask=input.ask)

        answers = await asyncio.gather(*(released(i) for i in input.ids))
        pairs = list(zip(input.ids, answers, strict=True))
        return WorkflowIds(
            ids=[i for i, out in pairs if out], unanswered=[i for i, out in pairs if out is None]
        )


async def _out_of_pool(client: Client, workflow_id: str, *, ask: bool) -> bool | None:
    """Closed (or never was), not an `AgentRun`, or (`ask`) in no pool by its own word. A
    holder that does not answer (None; its worker gone or slow) keeps its place for now."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        described = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return True
        raise
    if described.status != WorkflowExecutionStatus.RUNNING:
        return True
    if described.workflow_type != WORKFLOW_TYPE:
        return True  # a place asked for in another workflow's name: no run holds it
    if not ask:
        return False
    try:
        in_pool = await handle.query(
            IN_POOL_QUERY, result_type=bool, rpc_timeout=IN_POOL_QUERY_TIMEOUT
        )
    except WorkflowQueryFailedError as err:
        activity.logger.warning(
            "holder %s did not say whether it is in a pool: %s", workflow_id, err
        )
        return False
    except RPCError as err:
        activity.logger.warning(
            "holder %s did not answer whether it is in a pool: %s", workflow_id, err
        )
        return None
    return in_pool is False
