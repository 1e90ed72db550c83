"""What a run's safety net costs: each restart's sandbox time, priced at the run's `rates`.
Pure functions of the state and the time (no temporalio, no I/O).

Two moments of a restart are measured, both from what the workflow itself sees:

- **noticed**: the failed sandbox is set aside (after its checkpoint was salvaged, before it is
  paused). The work lost is the sandbox time from the agent's last saved progress (its last
  checkpoint taken, or its start) to then, or to its lease end if it sat paused there: a
  crashed agent redoes it, a stalled one wasted it.
- **restarted**: the new sandbox runs the agent. The setup is the time from noticed to then
  (pausing the old sandbox, creating, cloning, uploading, starting), less any wait for a
  person in between (the sandbox is paused and nothing runs).

Each second of either is priced as one sandbox of the run's size (`budget.hourly_rate_usd`).
Fresh-context starts and wakes at a lease end make no new sandbox and cost nothing here.
"""

from __future__ import annotations

from datetime import datetime

from overnight.core.run_costs import RestartCause, RestartCost, SafetyNet
from workflows.pure.budget import (
    MICROS_PER_USD,
    SECONDS_PER_HOUR,
    estimated_spend_usd,
    hourly_rate_usd,
)
from workflows.pure.state import SupervisorState

# The status and result carry this many of the latest restarts' own figures.
RECENT_COSTS = 20
REASON_CHARS = 200

_CAUSES: tuple[tuple[str, RestartCause], ...] = (
    ("agent looped", "looped"),  # first: its note is the agent's words, and may say anything
    ("agent crashed", "crashed"),
    ("agent was killed", "crashed"),
    ("agent process is gone", "crashed"),
    ("could not start the agent", "sandbox_failed"),
    ("agent stalled", "stalled"),
    ("sandbox time limit", "time_limit"),
    ("at its lease end", "time_limit"),
    ("ended before the agent started", "time_limit"),
    ("fresh-context starts used up", "fresh_starts_used_up"),
    ("sandbox", "sandbox_failed"),
    ("resumed after", "resumed"),
    ("daily spending window", "resumed"),
)


def cause_of(reason: str) -> RestartCause:
    """A restart reason (as `decide` words it) in a few words a report can count."""
    for start, cause in _CAUSES:
        if start in reason:
            return cause
    return "other"


def noticed(state: SupervisorState, now: datetime) -> None:
    """The current sandbox is being set aside: note the work lost since the last save."""
    if (
        not state.net.safety_net_kept
        or state.sandbox_id is None
        or state.net.net_noticed_at is not None
    ):
        return
    ran_until = now
    if state.sandbox.sandbox_paused and state.sandbox.lease_ends_at is not None:
        ran_until = min(now, state.sandbox.lease_ends_at)
    saved = state.progress.last_progress_at or state.sandbox.sandbox_started_at or now
    state.net.net_lost_seconds = max(0.0, (ran_until - saved).total_seconds())
    state.net.net_noticed_at = now
    state.net.net_attention_seconds_at_notice = state.attention.attention_seconds


def restarted(state: SupervisorState, now: datetime) -> None:
    """A new sandbox runs the agent: the pending restart's cost is complete."""
    if state.net.net_noticed_at is None:
        return
    waited = state.attention.attention_seconds - state.net.net_attention_seconds_at_notice
    setup = max(0.0, (now - state.net.net_noticed_at).total_seconds() - waited)
    reason = state.attempts.restarts[-1].reason if state.attempts.restarts else "restart"
    cost = restart_cost(state, state.attempt, reason, state.net.net_lost_seconds, setup)
    totals = state.net.net_totals
    totals.restarts += 1
    totals.lost_seconds = round(totals.lost_seconds + cost.lost_seconds, 3)
    totals.setup_seconds = round(totals.setup_seconds + cost.setup_seconds, 3)
    totals.usd = round(totals.usd + cost.usd, 9)
    totals.by_cause[cost.cause] = totals.by_cause.get(cost.cause, 0) + 1
    totals.recent = [*totals.recent, cost][-RECENT_COSTS:]
    state.net.net_noticed_at = None
    state.net.net_lost_seconds = 0.0
    state.net.net_attention_seconds_at_notice = 0.0


def restart_cost(
    state: SupervisorState, attempt: int, reason: str, lost_seconds: float, setup_seconds: float
) -> RestartCost:
    rate = hourly_rate_usd(state.spec)
    return RestartCost(
        attempt=attempt,
        reason=reason[:REASON_CHARS],
        cause=cause_of(reason),
        lost_seconds=round(lost_seconds, 3),
        setup_seconds=round(setup_seconds, 3),
        usd=round((lost_seconds + setup_seconds) / SECONDS_PER_HOUR * rate, 9),
    )


def summary(state: SupervisorState, now: datetime) -> SafetyNet | None:
    """The run's figures as of `now` (None for runs begun before they were kept)."""
    if not state.net.safety_net_kept:
        return None
    sandbox = sandbox_usd(state, now)
    totals = state.net.net_totals
    share = round(totals.usd / sandbox, 4) if sandbox > 0 else None
    return totals.model_copy(update={"sandbox_usd": round(sandbox, 9), "share": share})


def sandbox_usd(state: SupervisorState, now: datetime) -> float:
    """What the run's sandboxes cost: the sandbox part of the spend budget's figure (the
    provider's charges where read, the estimate elsewhere), never the model spend an agent
    reports, which the safety net is no share of."""
    spend = estimated_spend_usd(state, now)
    for figure in state.money.charges.values():
        spend += figure.micros / MICROS_PER_USD - figure.estimated_usd
    return spend
