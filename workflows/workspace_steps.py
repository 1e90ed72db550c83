"""AgentRun's workspace steps: keep the workspace when the checkpoint changed, and rewind to a
kept checkpoint when a person asks (the `rewind` update, workflows/rewind_messages.py).

Workflow code (the activity by name); the decisions are in `workflows.pure.workspace`. A run whose
spec keeps no workspace never asks the marker, so no history recorded before meets a step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from overnight.models import RunSpec
    from overnight.specs import redact_url
    from overnight.workspace_spec import MEMO_KEY, REF_ROOT, find
    from workflows import host_steps
    from workflows.calls import workspace as workspace_calls
    from workflows.patches import WORKSPACE_KEPT_PATCH
    from workflows.pure import workspace
    from workflows.pure.state import SupervisorState

Restart = Callable[..., Awaitable[None]]


def keeping(s: SupervisorState) -> bool:
    """Whether the run keeps its workspace: asked once, at its first checkpoint."""
    if s.workspace_keeping is None and s.spec.keep_workspace and s.checkpoint_digest is not None:
        s.workspace_keeping = workflow.patched(WORKSPACE_KEPT_PATCH)
    return bool(s.workspace_keeping)


async def keep_if_changed(s: SupervisorState, *, running: bool = True) -> None:
    """Keep the workspace once per checkpoint change (a sandbox not seen running is kept at
    its salvage, which wakes it). Never raises for the keep: its outcome is recorded."""
    if not keeping(s) or not running or not workspace.due(s):
        return
    assert s.sandbox_id is not None
    number = workspace.number_next(s)
    kept = await workspace_calls.keep_workspace(s, host_steps.current_route(s), number)
    entry = workspace.record(s, number, kept, workflow.now())
    if entry.outcome not in ("pushed", "skipped"):
        workflow.logger.warning("workspace not kept at checkpoint %d: %s", number, entry.detail)
    if entry.outcome == "pushed":
        note_refs_pushed(s)


def note_refs_pushed(s: SupervisorState) -> None:
    """The run pushed a ref of its own (a kept workspace, or the work its done check ran
    against): `overnight reap` finds the runs whose refs it may delete by this memo (the
    repository without its credentials: a memo is listed with the run). Set once."""
    if not s.workspace_memo:
        workflow.upsert_memo({MEMO_KEY: _memo(s.spec)})
        s.workspace_memo = True


async def rewind(s: SupervisorState, restart: Restart) -> None:
    """Go on from kept checkpoint `s.rewind_to` in a new sandbox (a new attempt, not counted
    against the restarts): its workspace and its checkpoint put back by the create."""
    number, s.rewind_to = s.rewind_to, None
    target = None if number is None else find(s.workspace_kept, number)
    if target is None or target.commit is None:
        return  # the validator let it through; the record fell out of the kept ones since
    s.rewinding = target
    await restart(s, f"rewound to checkpoint {number} (asked by a person)", counted=False)


def _memo(spec: RunSpec) -> dict[str, object]:
    """What `reap` reads of a run that pushed refs: where, and for how long after it ends."""
    return {
        "refs": f"{REF_ROOT}/{spec.run_id}/",
        "repo": redact_url(spec.repo),
        "keep_failed_days": spec.keep_failed_days,
    }
