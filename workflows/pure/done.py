"""The done check (`RunSpec.done_when`): what a round of checks means for the run. Pure.

After the agent exits 0 the checks run one by one, stopping at the first that fails: those of
`done_when_in_place` in its sandbox, then those of `done_when` against the run's pushed work in
a sandbox of their own (runs begun before that: `done_when` in the agent's sandbox). All pass:
the run finishes. One fails: the round is counted against
`budget.max_done_checks`, and the agent is started again in the same sandbox with a fresh
process, its restart reason naming the failed check (`DoneRound`); the round that uses the
last one makes the run need a person instead, its sandbox paused where it stands. An
extension then starts the agent again with that failure (`verdict` again, on resume).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from overnight.core.done_check import DoneCheck, exhausted_reason, failure_reason
from workflows.pure import budget, lease
from workflows.pure.state import SupervisorState

# A check's lease must outlast its limit by this much (the kill after it, the answer's way back).
CHECK_LEASE_MARGIN = timedelta(seconds=90)


@dataclass(frozen=True)
class DoneRound:
    """A done check failed: start the agent again in its sandbox, with `reason`."""

    reason: str


@dataclass(frozen=True)
class InPlace:
    """A check run in the agent's sandbox: `done_when_in_place[index]` (`in_place`), or, for a
    run begun before the check sandbox, `done_when[index]`."""

    index: int
    in_place: bool


def wanted(state: SupervisorState) -> bool:
    return bool(state.spec.done_when or state.spec.done_when_in_place)


def in_place_checks(state: SupervisorState, fresh: bool) -> list[InPlace]:
    """The round's checks in the agent's sandbox, in order: `done_when_in_place`, then (not
    `fresh`: a run that does not check in a sandbox of its own) `done_when`."""
    spec = state.spec
    checks = [InPlace(index, True) for index in range(len(spec.done_when_in_place))]
    if not fresh:
        checks += [InPlace(index, False) for index in range(len(spec.done_when))]
    return checks


def lease_target(state: SupervisorState, now: datetime) -> datetime | None:
    """Where to move the lease end before a check so the check fits inside it (None: it fits,
    or the run keeps no lease). A check is bounded (under an hour), so it is given its time
    even when the budget ends sooner: the budget is judged after the round."""
    if not state.sandbox.lease_keeping:
        return None
    return check_lease_target(
        state.sandbox.lease_ends_at, state.spec.done_check_timeout_seconds, now
    )


def check_lease_target(
    lease_ends_at: datetime | None, timeout_seconds: float, now: datetime
) -> datetime | None:
    """Where to move a sandbox's lease end so a check of `timeout_seconds` fits before it
    (None: it fits, or the sandbox has no lease end)."""
    if lease_ends_at is None:
        return None
    needed = timedelta(seconds=timeout_seconds) + CHECK_LEASE_MARGIN
    if lease_ends_at >= now + needed:
        return None
    return now + min(needed, lease.MAX_AHEAD)


def unchecked(state: SupervisorState, round_number: int, problem: str, now: datetime) -> DoneCheck:
    """The round's failed check when the work could not be checked at all (not pushed, or not
    on the origin): the first of `done_when`, with no exit code and why."""
    return DoneCheck(
        command=state.spec.done_when[0],
        index=0,
        round=round_number,
        passed=False,
        tail=problem,
        at=now,
        problem=problem,
    )


def close_check_spend(state: SupervisorState, seconds: float) -> None:
    """A check sandbox's lifetime, at the spec's rates, into the run's spend (no provider
    figure is read for it: the estimate, like any sandbox without one)."""
    state.money.closed_spend_usd += (
        max(0.0, seconds) / budget.SECONDS_PER_HOUR * budget.hourly_rate_usd(state.spec)
    )


def record_round(state: SupervisorState, checks: list[DoneCheck]) -> DoneCheck | None:
    """Keep a round's checks; its failed one (None: all passed), counted."""
    state.done.done_results = list(checks)
    failed = next((check for check in checks if not check.passed), None)
    if failed is None:
        state.done.done_pending = None
        return None
    state.done.done_checks_used += 1
    state.done.done_pending = failure_reason(failed, state.spec.done_check_timeout_seconds)
    return failed


def verdict(state: SupervisorState, now: datetime) -> DoneRound | str | None:
    """After a round, or a person's extension while its failure waits: None when the checks
    passed, a `DoneRound` when the agent may try again, else why a person is needed."""
    if state.done.done_pending is None:
        return None
    if state.done.done_checks_used >= state.budget.max_done_checks:
        last = next(
            (check for check in reversed(state.done.done_results) if not check.passed), None
        )
        if last is None:  # a run carried over without its results: the reason says enough
            return f"done checks used up: {state.done.done_pending}"
        return exhausted_reason(
            last,
            state.done.done_checks_used,
            state.budget.max_done_checks,
            state.spec.done_check_timeout_seconds,
        )
    out_of_budget = budget.exhausted_reason(state, now)
    if out_of_budget is not None:
        return out_of_budget
    return DoneRound(state.done.done_pending)


def waiting_for_person(state: SupervisorState) -> bool:
    """A failed round waits for a person, its sandbox paused where it stands."""
    return (
        state.done.done_pending is not None
        and state.sandbox.paused_in_place
        and state.sandbox_id is not None
    )
