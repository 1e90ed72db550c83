"""AgentRun's workspace steps: keep the workspace when the checkpoint changed, and rewind to a
kept checkpoint when a person asks (the `rewind` update, workflows/rewind_messages.py).

Workflow code (the activity by name); the decisions are in `workflows.pure.workspace`. A run whose
spec keeps no workspace never asks the marker, so no history recorded before meets a step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from overnight.core.models import RunSpec
    from overnight.core.specs import redact_url
    from overnight.core.workspace_spec import MEMO_KEY, REF_ROOT, find
    from workflows import admission_steps, host_steps, kit_request_steps
    from workflows.calls import workspace as workspace_calls
    from workflows.patches import KEEP_HELD_PATCH, WORKSPACE_KEPT_PATCH
    from workflows.pure import workspace
    from workflows.pure.state import SupervisorState

Restart = Callable[..., Awaitable[None]]
Publish = Callable[[SupervisorState], None]


def keeping(s: SupervisorState) -> bool:
    """Whether the run keeps its workspace: asked once, at its first checkpoint."""
    if (
        s.workspace.workspace_keeping is None
        and s.spec.keep_workspace
        and s.progress.checkpoint_digest is not None
    ):
        s.workspace.workspace_keeping = workflow.patched(WORKSPACE_KEPT_PATCH)
    return bool(s.workspace.workspace_keeping)


async def keep_if_changed(s: SupervisorState, *, running: bool = True, hold: bool = False) -> None:
    """Keep the workspace once per checkpoint change (a sandbox not seen running is kept at
    its salvage, which wakes it). Never raises for the keep: its outcome is recorded. `hold`:
    a keep that could not be pushed holds the run for a person (`keep_waits`; its agent seen
    running, not a sandbox being set aside), behind `KEEP_HELD_PATCH`."""
    if not keeping(s) or not running or not workspace.due(s):
        return
    assert s.sandbox_id is not None
    number = workspace.number_next(s)
    kept = await workspace_calls.keep_workspace(s, host_steps.current_route(s), number)
    entry = workspace.record(s, number, kept, workflow.now())
    if entry.outcome not in ("pushed", "skipped"):
        workflow.logger.warning("workspace not kept at checkpoint %d: %s", number, entry.detail)
    if entry.outcome == workspace.HELD_OUTCOME and hold and workflow.patched(KEEP_HELD_PATCH):
        s.workspace.keep_waits = number
    if entry.outcome == "pushed":
        note_refs_pushed(s)


async def keep_again(s: SupervisorState, publish: Publish) -> str | None:
    """A person extended a run a failed keep held: wake its sandbox, keep the workspace
    again (a failure holds it again), and go on; why a restart from the checkpoint is needed
    instead when the sandbox could not be woken (None: it goes on, or was cancelled queued)."""
    if not await admission_steps.back_in(s, publish):
        return None
    if not await kit_request_steps.wake_in_place(s, "keep the workspace again", agent_ended=False):
        return "sandbox paused for its failed keep could not be woken"
    s.workspace.keep_waits = None
    s.workspace.workspace_digest = None  # the checkpoint as it stands is kept again
    s.state = "running"
    await keep_if_changed(s, hold=True)
    return None


def note_refs_pushed(s: SupervisorState) -> None:
    """The run pushed a ref of its own (a kept workspace, or the work its done check ran
    against): `overnight reap` finds the runs whose refs it may delete by this memo (the
    repository without its credentials: a memo is listed with the run). Set once."""
    if not s.workspace.workspace_memo:
        workflow.upsert_memo({MEMO_KEY: _memo(s.spec)})
        s.workspace.workspace_memo = True


async def rewind(s: SupervisorState, restart: Restart) -> None:
    """Go on from kept checkpoint `s.workspace.rewind_to` in a new sandbox (a new attempt, not
    counted against the restarts): its workspace and its checkpoint put back by the create."""
    number, s.workspace.rewind_to = s.workspace.rewind_to, None
    target = None if number is None else find(s.workspace.workspace_kept, number)
    if target is None or target.commit is None:
        return  # the validator let it through; the record fell out of the kept ones since
    s.workspace.rewinding = target
    await restart(s, f"rewound to checkpoint {number} (asked by a person)", counted=False)


def _memo(spec: RunSpec) -> dict[str, object]:
    """What `reap` reads of a run that pushed refs: where, and for how long after it ends."""
    return {
        "refs": f"{REF_ROOT}/{spec.run_id}/",
        "repo": redact_url(spec.repo),
        "keep_failed_days": spec.keep_failed_days,
    }
