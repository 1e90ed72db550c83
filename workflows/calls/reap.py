"""`overnight reap` once, as an activity (overnight.worker.reaping), for `OvernightReap`."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import ActivityName, ReapSummary
    from workflows import policies


async def reap_sandboxes() -> ReapSummary:
    summary: ReapSummary = await workflow.execute_activity(
        ActivityName.REAP_SANDBOXES,
        result_type=ReapSummary,
        **policies.REAP.options(),
        summary="reap: delete sandboxes no run needs (past retention, closed runs')",
    )
    return summary
