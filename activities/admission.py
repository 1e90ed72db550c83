"""Admission's activities and the worker's admission settings (read from its environment here).

- `request_admission`: a run asks its pool's `OvernightAdmission` workflow for a place, by
  signal-with-start, so the first run of a pool starts it. Asked twice, it is answered twice
  and counted once (the workflow knows each holder by its workflow id).
- `closed_workflows`: which of the places' holders have closed (terminated, timed out, ...)
  without giving their place back, so the admission workflow takes their places back.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import Priority
from temporalio.service import RPCError, RPCStatusCode

from activities.admission_models import AdmissionAsk, WorkflowIds
from activities.errors import ErrorType, non_retryable
from activities.models import ActivityName
from overnight.admission import (
    ADMISSION_WORKFLOW,
    REQUEST_SIGNAL,
    AdmissionSettings,
    key_fingerprint,
    parse_admission,
)

# Describes in flight at once while looking for closed holders.
DESCRIBES_AT_ONCE = 16
# The admission workflow's own tasks go before the runs' when the task queue is backed up.
ADMISSION_PRIORITY = Priority(priority_key=1)


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
    def __init__(self, client: Client | None) -> None:
        self._client = client

    def all(self) -> list[Callable[..., Any]]:
        return [self.request_admission, self.closed_workflows]

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
