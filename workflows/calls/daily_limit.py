"""The key's daily spending limit, read while a run waits for its window
(activities/sandbox/daily_limit.py); what a sandbox cost comes back with its end
(`sandbox_lifecycle`)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import ActivityName, MoneyRead, ReadDailyLimitInput
    from overnight.core.models import RunSpec
    from workflows import policies
    from workflows.calls.outcomes import best_effort


async def read_daily_limit(spec: RunSpec) -> MoneyRead | None:
    """The key's daily spending limit, read fresh; None when it could not be read."""
    read: MoneyRead | None = await best_effort(
        workflow.execute_activity(
            ActivityName.READ_DAILY_LIMIT,
            ReadDailyLimitInput(provider=spec.provider),
            result_type=MoneyRead,
            **policies.CLEANUP.options(),
            summary="read the key's daily spending limit (waiting for its window)",
        ),
        "read the daily spending limit",
    )
    return read
