"""AgentRun's snapshot steps: take one at a safe point, and delete a run's at its end.

Workflow code (activities by name); the decisions are in `workflows.snapshot`. Runs with
`recovery: "checkpoint"` (every history recorded before snapshots) never reach these steps,
so they add no command to an old history's path.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.models import (
        ActivityName,
        DeleteSnapshotsInput,
        SnapshotList,
        SnapshotTaken,
        TakeSnapshotInput,
    )
    from overnight.models import SnapshotRecord
    from workflows import budget, calls, host_steps, policies
    from workflows.snapshot import TakeSnapshot, superseded
    from workflows.state import SupervisorState


async def take_snapshot(s: SupervisorState, decision: TakeSnapshot) -> None:
    """Capture the sandbox; a failure is recorded (and tried again later), never raised."""
    assert s.sandbox_id is not None
    spec = s.spec
    s.snapshot_tries += 1
    s.snapshot_last_try_at = workflow.now()
    digest = s.checkpoint_digest
    why = f"agent asked (request {decision.request})" if decision.request else "checkpoint changed"
    old = superseded(s)
    try:
        taken: SnapshotTaken = await calls.on_host(
            host_steps.current_route(s),
            ActivityName.TAKE_SNAPSHOT,
            TakeSnapshotInput(
                provider=spec.provider,
                sandbox_id=s.sandbox_id,
                run_id=spec.run_id,
                number=s.snapshot_tries,
                mode=spec.snapshot_mode or "disk",
                retention_days=spec.snapshot_retention_days,
                request=decision.request,
                delete_ids=old,
            ),
            result_type=SnapshotTaken,
            start_to_close_timeout=policies.SNAPSHOT_TIMEOUT,
            heartbeat_timeout=policies.SNAPSHOT_HEARTBEAT,
            retry_policy=policies.SNAPSHOT_RETRY,
            summary=f"snapshot {s.snapshot_tries} of sandbox {s.attempt} ({why})",
        )
    except ActivityError as err:
        calls.reraise_cancellation(err)
        taken = SnapshotTaken(state="failed", error=calls.describe(err))
    now = workflow.now()
    s.snapshot_pause_seconds += taken.pause_seconds
    if taken.state != "ready" or taken.snapshot_id is None:
        s.snapshot_failures += 1
        s.snapshot_error = taken.error or "capture failed"
        workflow.logger.warning("snapshot %d failed: %s", s.snapshot_tries, s.snapshot_error)
        return
    budget.close_snapshot_spend(s, taken.deleted, now)
    s.snapshots.append(
        SnapshotRecord(
            snapshot_id=taken.snapshot_id,
            mode=spec.snapshot_mode or "disk",
            taken_at=now,
            size_bytes=taken.size_bytes,
            pause_seconds=taken.pause_seconds,
            attempt=s.attempt,
            fresh_start=s.process_fresh_start,
            request=decision.request,
        )
    )
    s.snapshots_taken += 1
    s.snapshot_error = None
    s.snapshot_checkpoint_digest = digest
    s.snapshot_request_done = max(s.snapshot_request_done, decision.request)


async def delete_all(s: SupervisorState, why: str) -> None:
    """At the run's end: delete its snapshots (best effort; `overnight reap` finds strays)."""
    if not s.snapshots:
        return
    ids = [record.snapshot_id for record in s.snapshots]
    try:
        await workflow.execute_activity(
            ActivityName.DELETE_SNAPSHOTS,
            DeleteSnapshotsInput(provider=s.spec.provider, snapshot_ids=ids),
            result_type=SnapshotList,
            start_to_close_timeout=policies.ACTION_TIMEOUT,
            retry_policy=policies.CLEANUP_RETRY,
            summary=f"delete {len(ids)} snapshot(s) ({why})",
        )
    except ActivityError as err:
        calls.reraise_cancellation(err)
        workflow.logger.warning("could not delete the run's snapshots: %s", calls.describe(err))
        return
    budget.close_snapshot_spend(s, ids, workflow.now())
