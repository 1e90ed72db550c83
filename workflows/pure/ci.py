"""CI rounds (`pull_request.until_checks_pass`): what a look at the pull request's checks
means for the run. Pure (no temporalio, no I/O).

Once the pull request is open on the pushed commit, the run waits on its CI with its sandbox
paused and its admission place given back, looking through `watch_checks` windows. All
reported checks pass: the run finishes. One fails: the agent is started again in its sandbox
(`CiRound`, told the failing check and its log's tail), within `Budget.max_ci_rounds`; past
them, or when the budget is spent, a person is needed, the sandbox paused where it stands, and
an extension (`extend --ci-rounds`) starts the agent again with the same failure. Checks
still pending after `attention_hours` (or none reported within `FIRST_REPORT_SECONDS`) need a
person too; an extension watches again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from activities.models.delivery import ChecksSeen
from overnight.core import ci_rounds
from overnight.core.ci_rounds import CiView
from workflows.pure import budget
from workflows.pure.state import SupervisorState

# The failing checks the pull request's body names (the latest kept).
MAX_FAILED_KEPT = 20


@dataclass(frozen=True)
class CiRound:
    """A CI check failed: start the agent again in its sandbox, told `told`, with `reason`."""

    reason: str
    told: str


@dataclass(frozen=True)
class Passed:
    """Every check reported on the commit passed: the run finishes."""


def wanted(state: SupervisorState) -> bool:
    """The run's finish waits for its pull request's checks to pass."""
    wanted_pr = state.spec.pull_request
    return state.delivery.finish_pushes and wanted_pr is not None and wanted_pr.until_checks_pass


def pull_request_behind(state: SupervisorState) -> bool:
    """A CI round pushed new work: the pull request's body is brought up to date with it."""
    return (
        bool(state.ci.ci_watching)
        and state.delivery.pull_request_commit != state.delivery.pushed_commit
    )


def poll_seconds(state: SupervisorState) -> float:
    """How often a watch asks GitHub: the run's own poll, at most a minute (each unchanged
    answer is a 304, free against the rate limit)."""
    return min(60.0, max(1.0, state.spec.poll_seconds))


def begin_watch(state: SupervisorState, now: datetime) -> None:
    assert state.delivery.pushed_commit is not None
    if state.ci.ci_waiting_since is None:
        state.ci.ci_waiting_since = now
    view = _view_of(state)
    if view.commit != state.delivery.pushed_commit:
        view.commit, view.state, view.pending, view.passed = (
            state.delivery.pushed_commit,
            "pending",
            [],
            [],
        )


def end_watch(state: SupervisorState, now: datetime) -> None:
    if state.ci.ci_waiting_since is not None:
        state.ci.ci_waited_seconds += max(0.0, (now - state.ci.ci_waiting_since).total_seconds())
    state.ci.ci_waiting_since = None


def waited_seconds(state: SupervisorState, now: datetime) -> float:
    """Time spent waiting on CI so far (not run time)."""
    waited = state.ci.ci_waited_seconds
    if state.ci.ci_waiting_since is not None:
        waited += max(0.0, (now - state.ci.ci_waiting_since).total_seconds())
    return waited


def watch_deadline(state: SupervisorState) -> datetime:
    """When checks still pending need a person: `attention_hours` after the watch began."""
    assert state.ci.ci_waiting_since is not None
    return state.ci.ci_waiting_since + timedelta(hours=state.spec.attention_hours)


def window_seconds(state: SupervisorState, now: datetime, most: timedelta) -> float:
    """How long the next watch may wait: `most`, within the deadline and the first report's."""
    ends = watch_deadline(state)
    view = _view_of(state)
    if view.state == "none" or view.polls == 0:
        assert state.ci.ci_waiting_since is not None
        first = state.ci.ci_waiting_since + timedelta(seconds=ci_rounds.FIRST_REPORT_SECONDS)
        ends = min(ends, first) if first > now else ends
    return max(0.0, min(most.total_seconds(), (ends - now).total_seconds()))


def after_look(
    state: SupervisorState, seen: ChecksSeen, now: datetime
) -> Passed | CiRound | str | None:
    """A watch came back: `Passed`, a `CiRound`, why a person is needed (str), or None to
    watch on."""
    view = _view_of(state)
    view.polls += seen.polls
    view.pending, view.passed = list(seen.pending), list(seen.passed)
    if seen.verdict == "success":
        view.state = "passed"
        return Passed()
    if seen.verdict == "failure" and seen.failing:
        view.state = "failing"
        first = seen.failing[0]
        view.failing = ci_rounds.shown_tail(first)
        others = [check.name for check in seen.failing[1:]]
        state.ci.ci_told = ci_rounds.told_text(first, seen.commit, others)
        state.ci.ci_failed = [*state.ci.ci_failed, ci_rounds.failing_line(first)][-MAX_FAILED_KEPT:]
        return verdict(state, now)
    view.state = "none" if seen.verdict == "none" else "pending"
    assert state.ci.ci_waiting_since is not None
    waited = (now - state.ci.ci_waiting_since).total_seconds()
    if now >= watch_deadline(state):
        return ci_rounds.still_pending_reason(seen.commit, view.pending, state.spec.attention_hours)
    if view.state == "none" and waited >= ci_rounds.FIRST_REPORT_SECONDS:
        return ci_rounds.no_report_reason(seen.commit)
    return None


def verdict(state: SupervisorState, now: datetime) -> CiRound | str | None:
    """After a failing look, or a person's extension while it waits: a `CiRound` when the
    agent may try again, else why a person is needed (None: no failure waits)."""
    if state.ci.ci_told is None:
        return None
    view = _view_of(state)
    most = state.budget.max_ci_rounds
    if state.ci.ci_rounds_used >= most:
        return ci_rounds.exhausted_reason(view.failing, state.ci.ci_rounds_used, most)
    out_of_budget = budget.exhausted_reason(state, now)
    if out_of_budget is not None:
        return out_of_budget
    assert view.failing is not None
    reason = ci_rounds.restart_reason(view.failing, state.ci.ci_rounds_used + 1)
    return CiRound(reason=reason, told=state.ci.ci_told)


def started_again(state: SupervisorState) -> None:
    """The agent was started again for the failure: a new round, its work to push again."""
    state.ci.ci_rounds_used += 1
    state.ci.ci_told = None
    state.delivery.pushed_commit = None
    state.delivery.push_at = None
    view = _view_of(state)
    view.rounds_used = state.ci.ci_rounds_used
    view.state = "pending"


def view(state: SupervisorState) -> CiView | None:
    """What the status and the result show (None: the run watches no CI)."""
    if not wanted(state) or state.ci.ci_watching is False:
        return None
    shown = (state.ci.ci_view or CiView()).model_copy(deep=True)
    shown.rounds_used = state.ci.ci_rounds_used
    shown.max_rounds = state.budget.max_ci_rounds
    return shown


def waiting_line(state: SupervisorState) -> str | None:
    """What a run waiting on CI waits on, in one line (None: it does not)."""
    shown = state.ci.ci_view
    if state.ci.ci_waiting_since is None or shown is None or shown.commit is None:
        return None
    pending = f": {', '.join(shown.pending[:5])}" if shown.pending else ""
    rounds = f"round {state.ci.ci_rounds_used} of {state.budget.max_ci_rounds}"
    return f"CI checks of {shown.commit[:12]} ({rounds}), pending{pending}"


def _view_of(state: SupervisorState) -> CiView:
    if state.ci.ci_view is None:
        state.ci.ci_view = CiView()
    return state.ci.ci_view
