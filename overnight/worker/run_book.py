"""What Temporal says of each run a reap meets, asked once per run however many sandboxes,
snapshots and stores of it the reap finds: open, gone, closed through its own end, or closed
otherwise (with the days its spec keeps a failed run's leftovers)."""

from __future__ import annotations

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from overnight.core.errors import OvernightError
from overnight.core.retention import RunEnd
from overnight.worker.run_history import run_spec

# A run that ended this way went through its own end: what it left paused it kept on purpose
# and labelled (and its snapshots it deleted, unless `keep_sandboxes`).
CLEAN_ENDINGS = (WorkflowExecutionStatus.COMPLETED, WorkflowExecutionStatus.CANCELED)


class RunBook:
    """What Temporal says of each run, asked once per run."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._ends: dict[str, RunEnd] = {}
        self._statuses: dict[str, WorkflowExecutionStatus | None] = {}

    async def status(self, run_id: str) -> WorkflowExecutionStatus | None:
        if run_id not in self._statuses:
            await self.end(run_id)
        return self._statuses[run_id]

    async def end(self, run_id: str) -> RunEnd:
        found = self._ends.get(run_id)
        if found is None:
            found = self._ends[run_id] = await self._look(run_id)
        return found

    async def _look(self, run_id: str) -> RunEnd:
        try:
            described = await self.client.get_workflow_handle(run_id).describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            self._statuses[run_id] = None
            return RunEnd(known=False)
        status = described.status
        self._statuses[run_id] = status
        if status == WorkflowExecutionStatus.RUNNING:
            return RunEnd(open=True)
        if status in CLEAN_ENDINGS:
            return RunEnd(clean=True, closed_at=described.close_time)
        return RunEnd(closed_at=described.close_time, keep_failed_days=await self._keep(run_id))

    async def _keep(self, run_id: str) -> int | None:
        try:
            return (await run_spec(self.client, run_id)).keep_failed_days
        except (OvernightError, RPCError):
            return None
