"""Taking a sandbox's snapshot and deleting a run's (activities/sandbox/snapshots.py)."""

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
    from workflows import policies
    from workflows.calls.outcomes import best_effort, describe, outcome
    from workflows.calls.routing import on_host
    from workflows.pure.hosts import Route
    from workflows.pure.snapshot import TakeSnapshot
    from workflows.pure.state import SupervisorState


async def take_snapshot(
    s: SupervisorState, route: Route, decision: TakeSnapshot, delete_ids: list[str]
) -> SnapshotTaken:
    """Capture the sandbox (deleting the snapshots it supersedes); a failure is a result."""
    assert s.sandbox_id is not None
    spec = s.spec
    why = f"agent asked (request {decision.request})" if decision.request else "checkpoint changed"
    taken = await outcome(
        on_host(
            route,
            ActivityName.TAKE_SNAPSHOT,
            TakeSnapshotInput(
                provider=spec.provider,
                sandbox_id=s.sandbox_id,
                run_id=spec.run_id,
                number=s.snapshot.snapshot_tries,
                mode=spec.snapshot_mode or "disk",
                retention_days=spec.snapshot_retention_days,
                request=decision.request,
                delete_ids=delete_ids,
            ),
            result_type=SnapshotTaken,
            **policies.SNAPSHOT.options(),
            summary=f"snapshot {s.snapshot.snapshot_tries} of sandbox {s.attempt} ({why})",
        )
    )
    if isinstance(taken, ActivityError):
        return SnapshotTaken(state="failed", error=describe(taken))
    result: SnapshotTaken = taken
    return result


async def delete_snapshots(s: SupervisorState, ids: list[str], why: str) -> bool:
    """Delete these snapshots of the run; False (logged) when it could not."""
    deleted: SnapshotList | None = await best_effort(
        workflow.execute_activity(
            ActivityName.DELETE_SNAPSHOTS,
            DeleteSnapshotsInput(provider=s.spec.provider, snapshot_ids=ids),
            result_type=SnapshotList,
            **policies.CLEANUP.options(),
            summary=f"delete {len(ids)} snapshot(s) ({why})",
        ),
        "delete the run's snapshots",
    )
    return deleted is not None
