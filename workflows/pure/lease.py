"""Keeping a progressing sandbox: when to extend its lease, and what a lease end means. Pure.

A sandbox's lease (its time limit) is extended only while the agent makes progress: once the
lease has `margin` left and the checkpoint changed since the last extension, it is moved to
`sandbox_timeout_seconds` from now (at most an hour, Runtime's rule), never past what the run's
hours and spend budget have left. A stalled agent's lease is left to end; so is every lease when
no worker is alive, and then the sandbox pauses (memory and files kept) and costs nothing more:
a dead man's switch. A sandbox found paused at its lease end is woken and carries on, unless
the agent had stalled before the lease ended or the budget is spent.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from workflows.pure.budget import budget_deadline
from workflows.pure.state import SupervisorState

# Runtime's `:extend` moves a lease at most an hour ahead of now; a minute less absorbs the
# difference between the worker's clock and Runtime's.
MAX_AHEAD = timedelta(seconds=3600 - 60)
# Extend once this much of the lease is left (or a quarter of a short lease).
MARGIN = timedelta(minutes=15)
# A lease end reported this close to now counts as reached (clocks differ a little).
LEASE_END_TOLERANCE = timedelta(seconds=5)
# An extension that would add less than this (or than the margin, for a short lease) is not
# worth a request.
LEAST_EXTENSION = timedelta(seconds=30)


def margin(state: SupervisorState) -> timedelta:
    return min(MARGIN, timedelta(seconds=state.spec.sandbox_timeout_seconds / 4))


def extension_point(state: SupervisorState) -> datetime | None:
    """When the next look must happen so the lease can still be extended in time."""
    if not state.sandbox.lease_keeping or state.sandbox.lease_ends_at is None:
        return None
    return state.sandbox.lease_ends_at - margin(state)


def progressed_since_extension(state: SupervisorState) -> bool:
    since = state.sandbox.lease_extended_at
    return state.progress.last_progress_at is not None and (
        since is None or state.progress.last_progress_at > since
    )


def extension_target(state: SupervisorState, now: datetime) -> datetime | None:
    """Where to move the lease end now, or None when it should be left as it is."""
    point = extension_point(state)
    if point is None or state.sandbox.lease_ends_at is None or now < point:
        return None
    if not progressed_since_extension(state):
        return None  # a stalled agent's sandbox is not kept
    lease = timedelta(seconds=state.spec.sandbox_timeout_seconds)
    target = min(now + min(lease, MAX_AHEAD), budget_deadline(state, now))
    if target - state.sandbox.lease_ends_at < min(LEAST_EXTENSION, margin(state)):
        return None
    return target


def lease_ended(state: SupervisorState, reported_end: datetime | None, now: datetime) -> bool:
    """Whether a sandbox found paused was paused by its lease end (not by someone)."""
    end = _lease_end(state, reported_end)
    return state.sandbox.lease_keeping and end is not None and end <= now + LEASE_END_TOLERANCE


def frozen_since(state: SupervisorState, reported_end: datetime | None, now: datetime) -> datetime:
    """When a sandbox paused by its lease end stopped running (its agent made no progress and
    cost no compute after that)."""
    end = _lease_end(state, reported_end) or now
    return min(end, now)


def _lease_end(state: SupervisorState, reported_end: datetime | None) -> datetime | None:
    """The provider's lease end, else the run's record; with `lease_end_either`, whichever
    came first: an extension that landed just after the lease end paused the sandbox moved
    the provider's end, not the pause."""
    recorded = state.sandbox.lease_ends_at
    if state.sandbox.lease_end_either and reported_end is not None and recorded is not None:
        return min(reported_end, recorded)
    return reported_end or recorded
