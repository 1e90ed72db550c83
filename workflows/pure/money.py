"""Money, workflow side: when to read what the provider charged, and what a read changes.
Pure functions of the state (no temporalio, no I/O).

Runtime's figures (`GET /v1/usage`: charged + held per sandbox) replace the estimate for the
sandboxes they cover; they are read at most every `MONEY_READ_EVERY` by the observe that is
running anyway (no activity of their own), and once more at each sandbox's end. The key's daily
spending limit (`GET /v1/limits`) is checked by the create, wake and extension activities
themselves; a run refused by it waits, looking again every `DAILY_WINDOW_RECHECK`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from activities.models import DailyLimitRead, MoneyRead, SandboxCharge
from overnight.core.models import DailyLimit
from overnight.core.provider_traits import traits
from workflows.pure import budget
from workflows.pure.state import SupervisorState

MONEY_READ_EVERY = timedelta(minutes=5)
DAILY_WINDOW_RECHECK = timedelta(minutes=15)


def keeps_account(state: SupervisorState) -> bool:
    """Whether the run's provider keeps an account it can read (the local one only
    estimates)."""
    return traits(state.spec.provider).keeps_account


def money_due(state: SupervisorState, now: datetime) -> bool:
    """Whether the next observe should bring back charges and the daily limit."""
    if not keeps_account(state):
        return False
    return state.money.money_read_at is None or now - state.money.money_read_at >= MONEY_READ_EVERY


def take_money(state: SupervisorState, money: MoneyRead | None, now: datetime) -> None:
    """What an observe read: the current sandbox's figure and the key's daily limit."""
    if money is None:
        return
    state.money.money_read_at = now
    if money.charge is not None and money.charge.sandbox_id == state.sandbox_id:
        take_charge(state, money.charge, now)
    if money.daily is not None:
        take_daily(state, money.daily, now)


def take_charge(state: SupervisorState, charge: SandboxCharge, now: datetime) -> None:
    """The current sandbox's figure (read at `now`; after its end, its final one)."""
    budget.record_charge(state, charge.sandbox_id, charge.charged_micros, charge.held_micros, now)


def take_daily(state: SupervisorState, daily: DailyLimitRead, now: datetime) -> None:
    state.money.daily_limit = DailyLimit(
        limit_usd=_usd(daily.limit_micros),
        used_usd=daily.used_micros / budget.MICROS_PER_USD,
        remaining_usd=_usd(daily.remaining_micros),
        read_at=now,
    )


def next_lease_micros(state: SupervisorState) -> int:
    """What a fresh lease of the run's sandbox size commits."""
    return budget.lease_cost_micros(state.spec, state.spec.sandbox_timeout_seconds)


def daily_room(state: SupervisorState, daily: DailyLimitRead) -> bool:
    """The key's daily limit covers the next lease again (or no limit is set)."""
    left = daily.remaining_micros
    return left is None or left >= next_lease_micros(state)


def _usd(micros: int | None) -> float | None:
    return None if micros is None else micros / budget.MICROS_PER_USD
