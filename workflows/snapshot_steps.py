"""AgentRun's snapshot steps: take one at a safe point, and delete a run's at its end.

Workflow code (activities by name); the decisions are in `workflows.pure.snapshot`. Runs with
`recovery: "checkpoint"` (every history recorded before snapshots) never reach these steps,
so they add no command to an old history's path.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from overnight.core.models import SnapshotRecord
    from workflows import host_steps
    from workflows.calls import snapshots
    from workflows.pure import budget
    from workflows.pure.snapshot import TakeSnapshot, superseded
    from workflows.pure.state import SupervisorState


async def take_snapshot(s: SupervisorState, decision: TakeSnapshot) -> None:
    """Capture the sandbox; a failure is recorded (and tried again later), never raised."""
    assert s.sandbox_id is not None
    spec = s.spec
    s.snapshot.snapshot_tries += 1
    s.snapshot.snapshot_last_try_at = workflow.now()
    digest = s.progress.checkpoint_digest
    taken = await snapshots.take_snapshot(s, host_steps.current_route(s), decision, superseded(s))
    now = workflow.now()
    s.snapshot.snapshot_pause_seconds += taken.pause_seconds
    if taken.state != "ready" or taken.snapshot_id is None:
        s.snapshot.snapshot_failures += 1
        s.snapshot.snapshot_error = taken.error or "capture failed"
        workflow.logger.warning(
            "snapshot %d failed: %s", s.snapshot.snapshot_tries, s.snapshot.snapshot_error
        )
        return
    budget.close_snapshot_spend(s, taken.deleted, now)
    s.snapshot.snapshots.append(
        SnapshotRecord(
            snapshot_id=taken.snapshot_id,
            mode=spec.snapshot_mode or "disk",
            taken_at=now,
            size_bytes=taken.size_bytes,
            pause_seconds=taken.pause_seconds,
            attempt=s.attempt,
            fresh_start=s.attempts.process_fresh_start,
            request=decision.request,
        )
    )
    s.snapshot.snapshots_taken += 1
    s.snapshot.snapshot_error = None
    s.snapshot.snapshot_checkpoint_digest = digest
    s.snapshot.snapshot_request_done = max(s.snapshot.snapshot_request_done, decision.request)


async def delete_all(s: SupervisorState, why: str) -> None:
    """At the run's end: delete its snapshots (best effort; `overnight reap` finds strays)."""
    if not s.snapshot.snapshots:
        return
    ids = [record.snapshot_id for record in s.snapshot.snapshots]
    if not await snapshots.delete_snapshots(s, ids, why):
        return
    budget.close_snapshot_spend(s, ids, workflow.now())
