"""The workspace kept at every checkpoint (`RunSpec.keep_workspace`): names, bounds, records.

At each checkpoint change overnight commits the workspace as the agent left it to a private
ref of the run's repository, `refs/overnight/<run_id>/<n>` (n: the run's n-th checkpoint, never
reused, so a rewind leaves the later refs as they were) and pushes it off the sandbox. Pure:
what a kept workspace is called and recorded as; the git work is in activities/workspace_*.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from overnight.core.model_base import _Strict

REF_ROOT = "refs/overnight"
# `max_workspace_mib`: what one keep may push (new objects), MiB; default and bounds.
DEFAULT_WORKSPACE_MIB = 100
MAX_WORKSPACE_MIB = 10240
# The kept checkpoints a run remembers (the oldest are forgotten, their refs stay to `reap`).
MAX_KEPT_RECORDS = 200
# The memo key a run that keeps its workspace sets, so `reap` finds its repository.
MEMO_KEY = "overnight-workspace"

KeepOutcome = Literal["pushed", "over_limit", "failed", "skipped"]


def ref_name(run_id: str, number: int) -> str:
    return f"{REF_ROOT}/{run_id}/{number}"


def run_refs(run_id: str) -> str:
    """The pattern of a run's refs (for `git ls-remote`)."""
    return f"{REF_ROOT}/{run_id}/*"


def check_ref_name(run_id: str, number: int) -> str:
    """Where the run's work is pushed for its `number`-th fresh done-check sandbox
    (overnight/core/done_check.py): beside the kept workspaces, reaped with them."""
    return f"{REF_ROOT}/{run_id}/check-{number}"


def owner_of_ref(ref: str) -> str | None:
    """The run id of a kept workspace's ref or a done check's (None: neither)."""
    found = run_of_ref(ref)
    if found is not None:
        return found[0]
    parts = ref.split("/")
    if len(parts) != 4 or "/".join(parts[:2]) != REF_ROOT:
        return None
    word, _, number = parts[3].partition("-")
    return parts[2] if word == "check" and number.isdigit() else None


def run_of_ref(ref: str) -> tuple[str, int] | None:
    """(run id, number) of `refs/overnight/<run>/<n>`; None for any other name."""
    parts = ref.split("/")
    if len(parts) != 4 or "/".join(parts[:2]) != REF_ROOT or not parts[3].isdigit():
        return None
    return parts[2], int(parts[3])


class KeptWorkspace(_Strict):
    """One checkpoint's workspace: its number, what became of it and, pushed, its commit."""

    number: int = Field(ge=1)
    outcome: KeepOutcome
    at: datetime
    attempt: int = 0
    ref: str | None = None
    commit: str | None = None
    # The bytes the push sent at most (objects not yet on the remote), or found over the limit.
    bytes: int = 0
    # The kept commit holds the checkpoint file too (a rewind restores it from there).
    has_checkpoint: bool = False
    detail: str = ""


class WorkspaceView(_Strict):
    """What the status says of a run's kept workspaces."""

    # The commit the run started from (its branch after the first clone).
    base: str | None = None
    kept: list[KeptWorkspace] = Field(default_factory=list)
    # The last keep that did not push, and why (over `max_workspace_mib`, a failure).
    problem: str | None = None
    rewinds: int = 0


def latest_pushed(kept: list[KeptWorkspace]) -> KeptWorkspace | None:
    for record in reversed(kept):
        if record.outcome == "pushed":
            return record
    return None


def find(kept: list[KeptWorkspace], number: int) -> KeptWorkspace | None:
    return next((record for record in kept if record.number == number), None)


def kept_numbers(kept: list[KeptWorkspace]) -> str:
    """The numbers of the kept checkpoints as runs of consecutive ones (`1..3, 5`): they are
    the checkpoints the run saw, not every one the agent wrote (two written between two of the
    run's looks are one), and the oldest records are forgotten."""
    runs: list[list[int]] = []
    for number in sorted({record.number for record in kept}):
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    said = [str(run[0]) if len(run) == 1 else f"{run[0]}..{run[-1]}" for run in runs]
    return ", ".join(said) or "none yet"


def rewind_refusal(
    keeping: bool, state: str, kept: list[KeptWorkspace], number: int, pending: bool
) -> str | None:
    """Why a run may not rewind to checkpoint `number` (None: it may)."""
    if not keeping:
        return "the run does not keep its workspace (keep_workspace is off)"
    if state != "running":
        return f"the run is {state}: a rewind goes on from a running run"
    if pending:
        return "a rewind is already under way"
    record = find(kept, number)
    if record is None:
        return f"the run has no checkpoint {number} (kept: {kept_numbers(kept)})"
    if record.outcome != "pushed" or record.commit is None:
        why = record.detail or record.outcome.replace("_", " ")
        return f"checkpoint {number}'s workspace was not kept ({why})"
    return None


def size_text(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    if count < 1024 * 1024:
        return f"{count / 1024:.0f} KiB"
    return f"{count / (1024 * 1024):.1f} MiB"


def workspace_line(view: WorkspaceView | None) -> str | None:
    """The card's and the CLI's line about the kept workspaces."""
    if view is None:
        return None
    latest = latest_pushed(view.kept)
    parts = []
    if latest is not None:
        parts.append(f"kept at checkpoint {latest.number} (`{latest.ref}`)")
    elif not view.kept:
        parts.append("kept at each checkpoint (none yet)")
    if view.problem:
        parts.append(view.problem)
    if view.rewinds:
        parts.append(f"rewound {view.rewinds}x")
    return " · ".join(parts)
