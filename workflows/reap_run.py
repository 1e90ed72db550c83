"""`OvernightReap`: `overnight reap` once, as an activity, for the Temporal Schedule the worker
sets up (`overnight-reap`, hourly: overnight.worker.reap_schedule). It deletes what no run
needs any more: sandboxes past their retention, those of closed runs left running, what a
killed process left half deleted (overnight.cli.reaping says exactly what)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import ActivityName, ReapSummary
    from workflows import policies

REAP_WORKFLOW = "OvernightReap"


@workflow.defn(name=REAP_WORKFLOW)
class ReapRun:
    @workflow.run
    async def run(self) -> ReapSummary:
        summary: ReapSummary = await workflow.execute_activity(
            ActivityName.REAP_SANDBOXES,
            result_type=ReapSummary,
            start_to_close_timeout=policies.REAP_TIMEOUT,
            retry_policy=policies.REAP_RETRY,
            summary="reap: delete sandboxes no run needs (past retention, closed runs')",
        )
        return summary
