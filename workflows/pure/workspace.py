"""The workspace kept at each checkpoint: when a keep is due, what it leaves in the run's state,
what a fresh sandbox is made from, what the status says. Pure (no temporalio, no I/O).

One keep per checkpoint change (the n-th checkpoint the run takes is number n, never reused);
a failed or refused keep is recorded and not tried again for that checkpoint. The run
remembers its last `MAX_KEPT_RECORDS` keeps (number, commit, outcome: about 200 bytes each),
not their checkpoints: a kept commit holds its checkpoint, so the history grows by what a
keep's record is, whatever the checkpoint's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from activities.models import AgentStarted
from activities.models.workspace import WorkspaceKeep, WorkspaceRestore
from overnight.core.workspace_spec import (
    MAX_KEPT_RECORDS,
    KeptWorkspace,
    WorkspaceView,
    latest_pushed,
)
from workflows.pure.run_record import take_checkpoint
from workflows.pure.state import SupervisorState


@dataclass(frozen=True)
class KeepAgain:
    """A keep that could not be pushed held the run; a person extended it (or asked `overnight
    push`): wake the sandbox, keep the workspace again, and go on."""


# The outcome of a keep that holds the run (`keep_waits`): the push did not reach the origin.
HELD_OUTCOME = "failed"


def held(s: SupervisorState) -> bool:
    """A failed keep holds the run, its sandbox paused where it stands."""
    return s.workspace.keep_waits is not None and s.sandbox_id is not None


def held_reason(s: SupervisorState) -> str:
    """Why the run waits for a person: the keep that failed, in its own words."""
    number = s.workspace.keep_waits
    entry = next((k for k in reversed(s.workspace.workspace_kept) if k.number == number), None)
    said = entry.detail if entry is not None and entry.detail else "the push failed"
    return (
        f"the workspace kept at checkpoint {number} could not be pushed to the origin: {said} "
        "(held so the work is not lost; `overnight push` tries again)"
    )


def due(s: SupervisorState) -> bool:
    """The kept checkpoint changed since the last keep, and there is a sandbox to keep."""
    return (
        bool(s.workspace.workspace_keeping)
        and s.sandbox_id is not None
        and s.progress.checkpoint_digest is not None
        and s.progress.checkpoint_digest != s.workspace.workspace_digest
    )


def number_next(s: SupervisorState) -> int:
    """Number the checkpoint about to be kept (counted whatever the keep's outcome)."""
    s.workspace.workspace_count += 1
    s.workspace.workspace_digest = s.progress.checkpoint_digest
    return s.workspace.workspace_count


def previous_commit(s: SupervisorState) -> str | None:
    latest = latest_pushed(s.workspace.workspace_kept)
    return None if latest is None else latest.commit


def record(s: SupervisorState, number: int, kept: WorkspaceKeep, now: datetime) -> KeptWorkspace:
    entry = KeptWorkspace(
        number=number,
        outcome=kept.outcome,
        at=now,
        attempt=s.attempt,
        ref=kept.ref,
        commit=kept.commit,
        bytes=kept.bytes,
        has_checkpoint=kept.has_checkpoint,
        detail=kept.detail[:300],
    )
    s.workspace.workspace_kept = [*s.workspace.workspace_kept, entry][-MAX_KEPT_RECORDS:]
    # Said until the next problem (later keeps that pushed show beside it).
    if kept.outcome not in ("pushed", "skipped"):
        s.workspace.workspace_problem = f"checkpoint {number}: {entry.detail or kept.outcome}"
    return entry


def restore_for(s: SupervisorState) -> WorkspaceRestore | None:
    """What a new sandbox starts from: the rewind's target, else the latest kept workspace."""
    if not s.workspace.workspace_keeping:
        return None
    target = s.workspace.rewinding or latest_pushed(s.workspace.workspace_kept)
    if target is None or target.ref is None or target.commit is None:
        return None
    return WorkspaceRestore(
        ref=target.ref, commit=target.commit, rewind=s.workspace.rewinding is not None
    )


def take_started(s: SupervisorState, started: AgentStarted, now: datetime) -> None:
    """What a create said of the workspace: the run's base (its first sandbox's), whether the
    kept workspace was put back, and a rewind's checkpoint, taken as the run's."""
    if s.workspace.workspace_base is None and started.workspace_base is not None:
        s.workspace.workspace_base = started.workspace_base
    restored = started.workspace_restored
    target, s.workspace.rewinding = s.workspace.rewinding, None
    if restored is None:
        return
    if restored.status != "restored":
        what = f"rewind to checkpoint {target.number}" if target else f"sandbox {s.attempt}"
        s.workspace.workspace_problem = (
            f"{what} started without the kept workspace: {restored.detail}"
        )
        return
    if target is None:
        return
    s.workspace.rewinds += 1
    if started.checkpoint_restored is not None:
        take_checkpoint(s, started.checkpoint_restored, now)
        s.workspace.workspace_digest = (
            s.progress.checkpoint_digest
        )  # not news: it is the one kept there


def view(s: SupervisorState) -> WorkspaceView | None:
    if not s.spec.keep_workspace or s.workspace.workspace_keeping is False:
        return None
    return WorkspaceView(
        base=s.workspace.workspace_base,
        kept=list(s.workspace.workspace_kept),
        problem=s.workspace.workspace_problem,
        rewinds=s.workspace.rewinds,
    )
