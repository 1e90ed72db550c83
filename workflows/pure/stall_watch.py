"""A stall seen coming: once the agent has gone half its `stall_seconds` without a checkpoint
the run takes, the status and the card say so ("no checkpoint for 13 min: stalls at 15 min"),
before the restart that would cost the work since its last one. Pure.

The stall clock starts at a checkpoint taken, and again at a new sandbox, a fresh start or a
wake (`SupervisorState.progress.last_progress_at`); the restart comes `stall_seconds` after
it, unless a last look finds a checkpoint after all (workflows/stall_steps.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from overnight.core.models import RunStatus
from workflows.pure.state import SupervisorState

# Said from this share of the stall threshold on.
SEEN_COMING = 0.5
# The run wakes at that share (so the card says it) only when this much is left after it: a
# look ending there lost with its worker runs to its heartbeat timeout (at most 270 s) and a
# retry, which must end before the stall deadline. Shorter thresholds: `status` alone says it.
WAKE_LEAD_SECONDS = 300.0


def stalls_at(state: SupervisorState) -> datetime | None:
    """When a running agent is restarted as stalled unless a checkpoint comes first; None when
    no agent is watched for it."""
    if state.state != "running" or state.progress.last_progress_at is None:
        return None
    return state.progress.last_progress_at + timedelta(seconds=state.spec.stall_seconds)


def seen_coming_at(state: SupervisorState) -> datetime | None:
    """When the run wakes so that its card says a running agent's stall is coming (None: no
    agent is watched, or its threshold is too short for a wake of its own)."""
    deadline = stalls_at(state)
    lead = state.spec.stall_seconds * (1 - SEEN_COMING)
    if deadline is None or lead < WAKE_LEAD_SECONDS:
        return None
    return deadline - timedelta(seconds=lead)


def stall_coming(status: RunStatus, now: datetime) -> str | None:
    """`no checkpoint for 13 min: stalls at 15 min` once past half the threshold; else None."""
    if status.state != "running" or status.stalls_at is None or not status.stall_seconds:
        return None
    quiet = (now - (status.stalls_at - timedelta(seconds=status.stall_seconds))).total_seconds()
    if quiet < status.stall_seconds * SEEN_COMING:
        return None
    return f"no checkpoint for {span(quiet)}: stalls at {span(status.stall_seconds)}"


def span(seconds: float) -> str:
    """`45 s`, `13 min`, `2 h 05 min` (whole units, rounded down)."""
    whole = max(0, int(seconds))
    if whole < 120:
        return f"{whole} s"
    if whole < 7200:
        return f"{whole // 60} min"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
