"""A workflow that calls one activity by name under a real retry policy (kept apart from the
test modules: the workflow sandbox re-imports the module a workflow lives in)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy


class ActivityCall(BaseModel):
    activity: str
    arg: dict[str, Any]
    maximum_attempts: int = 20
    retry_interval_seconds: float = 0.05


@workflow.defn
class RetriedActivity:
    """Runs `call.activity` once, with Temporal retrying it at a short fixed interval."""

    @workflow.run
    async def run(self, call: ActivityCall) -> dict[str, Any]:
        result: dict[str, Any] = await workflow.execute_activity(
            call.activity,
            call.arg,
            result_type=dict,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=call.retry_interval_seconds),
                backoff_coefficient=1.0,
                maximum_attempts=call.maximum_attempts,
            ),
        )
        return result
