"""Budget accounting: hours, spend, restarts and time paused waiting. Pure functions of the
state and the time."""

from __future__ import annotations

from datetime import datetime, timedelta

from overnight.core.models import Budget, BudgetExtension, RunSpec
from workflows.pure import kit_requests, model_books
from workflows.pure.state import SupervisorState
from workflows.pure.state_groups import ChargeFigure

SECONDS_PER_HOUR = 3600.0
MICROS_PER_USD = 1_000_000


def hourly_rate_usd(spec: RunSpec) -> float:
    """What one sandbox of this spec costs per hour of lifetime."""
    gib = spec.memory_mib / 1024
    return spec.vcpu * spec.rates.vcpu_hour_usd + gib * spec.rates.gib_hour_usd


def hours_used(state: SupervisorState, now: datetime) -> float:
    waited = state.attention.attention_seconds
    if state.attention.attention_since is not None:
        waited += max(0.0, (now - state.attention.attention_since).total_seconds())
    # Paused for a question or a wait: not run time either; nor waiting on the pull
    # request's CI (workflows/pure/ci.py), its sandbox paused.
    waited += kit_requests.waited_seconds(state, now) + state.ci.ci_waited_seconds
    if state.ci.ci_waiting_since is not None:
        waited += max(0.0, (now - state.ci.ci_waiting_since).total_seconds())
    active = (now - state.started_at).total_seconds() - waited
    return max(0.0, active) / SECONDS_PER_HOUR


def wait_hours_used(state: SupervisorState, now: datetime) -> float:
    """Time paused for the agent's questions and waits so far (`Budget.max_wait_hours`)."""
    return kit_requests.waited_seconds(state, now) / SECONDS_PER_HOUR


def wait_room_hours(state: SupervisorState, now: datetime) -> float:
    """How long the agent's next pause may last: what is left of the wait budget (runs begun
    before it had one: the run hours left, as they were clipped then)."""
    if state.kit.wait_budget_kept:
        return max(0.0, state.budget.max_wait_hours - wait_hours_used(state, now))
    return state.budget.max_hours - hours_used(state, now)


def wait_exhausted_reason(state: SupervisorState, now: datetime) -> str:
    used, most = wait_hours_used(state, now), state.budget.max_wait_hours
    return f"wait budget used up ({used:.2f} of {most:g} h paused for questions and waits)"


def snapshot_storage_usd(state: SupervisorState, now: datetime) -> float:
    """What the run's snapshots have cost to keep (the deleted ones' share is closed)."""
    rate = state.spec.rates.snapshot_gib_hour_usd
    held = 0.0
    for record in state.snapshot.snapshots:
        hours = max(0.0, (now - record.taken_at).total_seconds()) / SECONDS_PER_HOUR
        held += (record.size_bytes or 0) / 2**30 * hours * rate
    return state.snapshot.closed_snapshot_spend_usd + held


def close_snapshot_spend(state: SupervisorState, snapshot_ids: list[str], now: datetime) -> None:
    """Fold deleted snapshots' storage into the closed share and forget them."""
    gone = [r for r in state.snapshot.snapshots if r.snapshot_id in snapshot_ids]
    if not gone:
        return
    before = snapshot_storage_usd(state, now)
    state.snapshot.snapshots = [
        r for r in state.snapshot.snapshots if r.snapshot_id not in snapshot_ids
    ]
    state.snapshot.closed_snapshot_spend_usd += before - snapshot_storage_usd(state, now)


def estimated_spend_usd(state: SupervisorState, now: datetime) -> float:
    """Sandbox lifetimes x `rates`, plus snapshot storage: what the run would cost by the
    estimate alone."""
    spend = state.money.closed_spend_usd
    if state.snapshot.snapshots or state.snapshot.closed_snapshot_spend_usd:
        spend += snapshot_storage_usd(state, now)
    return spend + _current_segment_usd(state, now)


def spend_usd(state: SupervisorState, now: datetime) -> float:
    """What the budget counts: the sandboxes' and the model spend (the gateway's figure, or
    what the agent reported: workflows/pure/model_books.py)."""
    return sandbox_spend_usd(state, now) + model_books.model_spend_usd(state)


def sandbox_spend_usd(state: SupervisorState, now: datetime) -> float:
    """Each sandbox's provider figure (charged + held) where one was read, plus the estimate
    of the time since that read; the estimate where none was."""
    spend = estimated_spend_usd(state, now)
    for figure in state.money.charges.values():
        spend += figure.micros / MICROS_PER_USD - figure.estimated_usd
    return spend


def charged_usd(state: SupervisorState) -> float | None:
    """The provider's own figures, summed (None: it has given none)."""
    if not state.money.charges:
        return None
    return sum(figure.micros for figure in state.money.charges.values()) / MICROS_PER_USD


def record_charge(
    state: SupervisorState, sandbox_id: str, charged_micros: int, held_micros: int, now: datetime
) -> None:
    """Take the provider's figure for the current sandbox (read at `now`)."""
    estimate = state.money.sandbox_spent_before_usd + _current_segment_usd(state, now)
    state.money.charges[sandbox_id] = ChargeFigure(
        micros=charged_micros + held_micros, estimated_usd=estimate, read_at=now
    )


def _current_segment_usd(state: SupervisorState, now: datetime) -> float:
    if state.sandbox.sandbox_started_at is None:
        return 0.0
    lifetime = max(0.0, (now - state.sandbox.sandbox_started_at).total_seconds())
    return lifetime / SECONDS_PER_HOUR * hourly_rate_usd(state.spec)


def exhausted_reason(state: SupervisorState, now: datetime) -> str | None:
    """Why the run may not go on without a person, or None while budget is left."""
    budget = state.budget
    used = hours_used(state, now)
    if used >= budget.max_hours:
        return f"hours budget used up ({used:.2f} of {budget.max_hours:g} h)"
    if budget.max_spend_usd is not None:
        spent = spend_usd(state, now)
        if spent >= budget.max_spend_usd:
            return f"spend budget used up (${spent:.2f} of ${budget.max_spend_usd:.2f})"
    return None


def spend_left_micros(state: SupervisorState, now: datetime) -> int | None:
    """What is left of the spend budget, in Runtime's microdollars (None: no spend cap)."""
    if state.budget.max_spend_usd is None:
        return None
    return max(1, int((state.budget.max_spend_usd - spend_usd(state, now)) * 1_000_000))


def restarts_left(state: SupervisorState) -> int:
    return max(0, state.budget.max_restarts - state.attempts.restarts_used)


def budget_deadline(state: SupervisorState, now: datetime) -> datetime:
    """When hours or spend will run out if nothing changes."""
    hours_left = state.budget.max_hours - hours_used(state, now)
    deadline = now + timedelta(hours=max(0.0, hours_left))
    if state.budget.max_spend_usd is not None and state.sandbox.sandbox_started_at is not None:
        rate = hourly_rate_usd(state.spec)
        if rate > 0:
            usd_left = state.budget.max_spend_usd - spend_usd(state, now)
            deadline = min(deadline, now + timedelta(hours=max(0.0, usd_left / rate)))
    return deadline


def extended(budget: Budget, extension: BudgetExtension) -> Budget:
    spend = budget.max_spend_usd
    if spend is not None:
        spend += extension.spend_usd
    return Budget(
        max_restarts=budget.max_restarts + extension.restarts,
        max_hours=budget.max_hours + extension.hours,
        max_spend_usd=spend,
        max_wait_hours=budget.max_wait_hours + extension.wait_hours,
        max_done_checks=budget.max_done_checks + extension.done_checks,
        max_ci_rounds=budget.max_ci_rounds + extension.ci_rounds,
    )


def close_sandbox_spend(state: SupervisorState, now: datetime) -> None:
    """Fold the current sandbox's lifetime into the closed spend (it has been paused or stopped)."""
    segment = _current_segment_usd(state, now)
    state.money.closed_spend_usd += segment
    state.money.sandbox_spent_before_usd += segment
    state.sandbox.sandbox_started_at = None


def lease_cost_micros(spec: RunSpec, seconds: float) -> int:
    """What `seconds` of one sandbox's lease cost by the estimate, in microdollars."""
    return int(seconds / SECONDS_PER_HOUR * hourly_rate_usd(spec) * MICROS_PER_USD)


def micros_per_second(spec: RunSpec) -> float:
    return hourly_rate_usd(spec) * MICROS_PER_USD / SECONDS_PER_HOUR
