"""`OvernightReap`: `overnight reap` once, as an activity, for the Temporal Schedule the worker
sets up (`overnight-reap`, hourly: overnight.worker.reap_schedule). It deletes what no run
needs any more: sandboxes past their retention, those of closed runs left running, what a
killed process left half deleted (overnight.worker.reaping says exactly what)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import ReapSummary
    from workflows.calls.reap import reap_sandboxes

REAP_WORKFLOW = "OvernightReap"


@workflow.defn(name=REAP_WORKFLOW)
class ReapRun:
    @workflow.run
    async def run(self) -> ReapSummary:
        return await reap_sandboxes()
