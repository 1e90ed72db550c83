"""The workspace kept at a checkpoint: committed to the run's private ref and pushed off the
sandbox (activities/workspace/activities.py)."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.models import ActivityName
    from activities.models.workspace import KeepWorkspaceInput, WorkspaceKeep
    from workflows import policies
    from workflows.calls.outcomes import describe, outcome
    from workflows.calls.routing import on_host
    from workflows.pure import workspace
    from workflows.pure.hosts import Route
    from workflows.pure.state import SupervisorState


async def keep_workspace(s: SupervisorState, route: Route, number: int) -> WorkspaceKeep:
    """Keep the workspace as kept checkpoint `number`; a failed keep is an outcome, not raised."""
    assert s.sandbox_id is not None
    spec = s.spec
    kept = await outcome(
        on_host(
            route,
            ActivityName.KEEP_WORKSPACE,
            KeepWorkspaceInput(
                provider=spec.provider,
                sandbox_id=s.sandbox_id,
                run_id=spec.run_id,
                repo=spec.repo,
                repo_credential=spec.repo_credential,
                number=number,
                at=workflow.now(),
                max_bytes=spec.max_workspace_mib * 1024 * 1024,
                checkpoint_path=spec.checkpoint_path,
                max_checkpoint_bytes=spec.max_checkpoint_bytes,
                previous=workspace.previous_commit(s),
                base=s.workspace.workspace_base,
            ),
            result_type=WorkspaceKeep,
            **policies.KEEP_WORKSPACE.options(),
            summary=f"keep the workspace at checkpoint {number} (sandbox {s.attempt})",
        )
    )
    if isinstance(kept, ActivityError):
        return WorkspaceKeep(outcome="failed", detail=describe(kept))
    result: WorkspaceKeep = kept
    return result
