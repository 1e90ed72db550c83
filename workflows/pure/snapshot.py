"""Snapshot recovery's decisions (`RunSpec.recovery: "snapshot"`). Pure.

Captures happen only at safe points, between steps, never during a model call: when the agent
asks (its checkpoint's `snapshot_request` grows past the last one answered; the agent kit's
`snapshot_here()` writes it and waits for the answer), or, when the spec says automatic
captures are safe (`snapshot_on_checkpoint`), right after a checkpoint change. Two captures are
at least `snapshot_every_seconds` apart: one asked for sooner is taken when that time is up. A
failed capture is tried again after the same interval, never a restart. A restart makes the new
sandbox from the latest ready snapshot; with none, from the checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from activities.models import SnapshotRestore
from overnight.core.checkpoint_text import snapshot_request_of
from overnight.core.snapshot_spec import KEEP_SNAPSHOTS
from workflows.pure.state import SupervisorState


@dataclass(frozen=True)
class TakeSnapshot:
    """Pause the sandbox, capture it, wake it. `request`: the agent's request (0: automatic)."""

    request: int = 0


def snapshot_recovery(state: SupervisorState) -> bool:
    return state.spec.recovery == "snapshot"


def requested(checkpoint: str | None) -> int:
    """The agent's latest snapshot request in its checkpoint (0: none). Never raises."""
    return snapshot_request_of(checkpoint)


def kept_request(state: SupervisorState) -> int:
    """The snapshot request in the kept checkpoint, as read with it (else read now)."""
    if state.progress.checkpoint_facts is not None:
        return state.progress.checkpoint_facts.snapshot_request
    return requested(state.progress.checkpoint)


def _wanted(state: SupervisorState) -> int | None:
    """The request to answer (0: an automatic capture), or None when nothing is wanted."""
    if not snapshot_recovery(state) or state.sandbox_id is None or state.process_id is None:
        return None
    asked = kept_request(state)
    if asked > state.snapshot.snapshot_request_done:
        return asked
    changed = state.progress.checkpoint_digest not in (
        None,
        state.snapshot.snapshot_checkpoint_digest,
    )
    if state.spec.snapshot_on_checkpoint and changed:
        return 0
    return None


def earliest_capture(state: SupervisorState) -> datetime | None:
    if state.snapshot.snapshot_last_try_at is None:
        return None
    return state.snapshot.snapshot_last_try_at + timedelta(
        seconds=state.spec.snapshot_every_seconds
    )


def capture_due(state: SupervisorState, now: datetime) -> TakeSnapshot | None:
    if state.sandbox.sandbox_paused:
        return None
    wanted = _wanted(state)
    if wanted is None:
        return None
    earliest = earliest_capture(state)
    if earliest is not None and now < earliest:
        return None
    return TakeSnapshot(request=wanted)


def next_capture_at(state: SupervisorState, now: datetime) -> datetime | None:
    """When a wanted capture, held back by the interval, becomes due."""
    earliest = earliest_capture(state)
    if earliest is None or earliest <= now or _wanted(state) is None:
        return None
    return earliest


def restore_for(state: SupervisorState) -> SnapshotRestore | None:
    """What a restart makes its sandbox from: the latest ready snapshot (None: the checkpoint)."""
    if not snapshot_recovery(state) or not state.snapshot.snapshots:
        return None
    latest = state.snapshot.snapshots[-1]
    return SnapshotRestore(
        snapshot_id=latest.snapshot_id,
        mode=latest.mode,
        request=latest.request,
        adopt_start_key=f"{state.spec.run_id}-{latest.attempt}-{latest.fresh_start}",
    )


def superseded(state: SupervisorState) -> list[str]:
    """Snapshots to delete once the next one is ready (the last `KEEP_SNAPSHOTS` are kept)."""
    keep = KEEP_SNAPSHOTS - 1
    old = state.snapshot.snapshots[:-keep] if keep else state.snapshot.snapshots
    return [record.snapshot_id for record in old]
