"""Money, pure: what the budget counts (the estimate, the provider's figures, snapshot storage),
what is left of it, when the provider's account is read and what a read changes.

The default sandbox costs $0.08 an hour (2 vCPU x $0.025 + 4 GiB x $0.0075).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from activities.models import DailyLimitRead, MoneyRead, SandboxCharge
from overnight.core.models import Budget, Rates, SnapshotRecord
from tests.workflows.pure.test_decide import DEFAULT_RATE, T0, later, running, spec
from workflows.pure import budget, money
from workflows.pure.state import SupervisorState
from workflows.pure.state_groups import ChargeFigure

GIB = 2**30


def on_runtime(**overrides: Any) -> SupervisorState:
    return running(spec=spec(provider="runtime"), **overrides)


def snapshot(n: int, *, at: Any = T0, size: int | None = GIB) -> SnapshotRecord:
    return SnapshotRecord(
        snapshot_id=f"snap-{n}", mode="disk", taken_at=at, size_bytes=size, attempt=1
    )


# ---- the estimate ----------------------------------------------------------------------------


def test_a_sandbox_just_started_has_cost_nothing_yet() -> None:
    state = running(closed_spend_usd=0.5)
    assert budget.spend_usd(state, T0) == 0.5
    assert budget.estimated_spend_usd(state, T0) == 0.5


def test_a_wait_for_a_person_that_just_began_takes_no_time_off_the_hours() -> None:
    state = running(attention_since=later(hours=2))
    assert budget.hours_used(state, later(hours=2)) == 2.0


def test_closing_a_sandbox_folds_its_lifetime_into_the_closed_spend() -> None:
    state = running(closed_spend_usd=0.5, sandbox_spent_before_usd=0.1)
    budget.close_sandbox_spend(state, later(hours=1))
    assert state.money.closed_spend_usd == pytest.approx(0.5 + DEFAULT_RATE)
    assert state.money.sandbox_spent_before_usd == pytest.approx(0.1 + DEFAULT_RATE)
    assert state.sandbox.sandbox_started_at is None
    # Between sandboxes, time costs nothing.
    assert budget.spend_usd(state, later(hours=5)) == pytest.approx(0.5 + DEFAULT_RATE)


def test_a_leases_cost_and_the_cost_of_a_second() -> None:
    assert budget.lease_cost_micros(spec(), 3600) == 80_000
    assert budget.lease_cost_micros(spec(), 45) == 1_000
    assert budget.micros_per_second(spec()) == pytest.approx(80_000 / 3600)


def test_a_free_sandbox_never_runs_out_of_spend() -> None:
    free = Rates(vcpu_hour_usd=0, gib_hour_usd=0)
    capped = Budget(max_hours=2, max_spend_usd=1)
    state = running(spec=spec(rates=free, budget=capped), budget=capped)
    assert budget.budget_deadline(state, later(hours=1)) == later(hours=2)


# ---- snapshot storage ------------------------------------------------------------------------


def test_a_snapshot_just_taken_and_one_of_unknown_size_cost_nothing() -> None:
    state = running(sandbox_started_at=None, snapshots=[snapshot(1, at=later(hours=1))])
    assert budget.snapshot_storage_usd(state, later(hours=1)) == 0.0
    unknown = running(sandbox_started_at=None, snapshots=[snapshot(2, size=None)])
    assert budget.snapshot_storage_usd(unknown, later(hours=5)) == 0.0


def test_snapshot_storage_adds_to_the_closed_spend() -> None:
    rate = spec().rates.snapshot_gib_hour_usd
    state = running(sandbox_started_at=None, closed_spend_usd=0.5, snapshots=[snapshot(1)])
    assert budget.spend_usd(state, later(hours=2)) == pytest.approx(0.5 + 2 * rate)


def test_deleting_the_only_snapshot_keeps_what_it_cost() -> None:
    rate = spec().rates.snapshot_gib_hour_usd
    state = running(sandbox_started_at=None, closed_snapshot_spend_usd=1.0, snapshots=[snapshot(1)])
    budget.close_snapshot_spend(state, ["snap-1"], later(hours=3))
    assert state.snapshot.snapshots == []
    assert state.snapshot.closed_snapshot_spend_usd == pytest.approx(1.0 + 3 * rate)
    assert budget.snapshot_storage_usd(state, later(hours=10)) == pytest.approx(1.0 + 3 * rate)


def test_deleting_a_snapshot_the_run_does_not_hold_changes_nothing() -> None:
    state = running(sandbox_started_at=None, snapshots=[snapshot(1)])
    budget.close_snapshot_spend(state, ["snap-9"], later(hours=3))
    assert [r.snapshot_id for r in state.snapshot.snapshots] == ["snap-1"]
    assert state.snapshot.closed_snapshot_spend_usd == 0


# ---- the provider's figures ------------------------------------------------------------------


def test_the_providers_figure_replaces_the_estimate_it_covers() -> None:
    # Box 0 was estimated at $0.50 but charged $0.70; box 1 runs since T0 (estimated).
    figure = ChargeFigure(micros=700_000, estimated_usd=0.5, read_at=T0)
    state = running(closed_spend_usd=0.5, charges={"box-0": figure})
    assert budget.spend_usd(state, later(hours=1)) == pytest.approx(0.7 + DEFAULT_RATE)
    assert budget.charged_usd(state) == pytest.approx(0.7)


def test_charged_is_none_until_the_provider_gave_a_figure_then_their_sum() -> None:
    assert budget.charged_usd(running()) is None
    figures = {
        "box-0": ChargeFigure(micros=250_000, estimated_usd=0.2, read_at=T0),
        "box-1": ChargeFigure(micros=1_500_000, estimated_usd=1.0, read_at=T0),
    }
    assert budget.charged_usd(running(charges=figures)) == pytest.approx(1.75)


def test_a_charge_read_is_recorded_beside_the_estimate_up_to_the_read() -> None:
    state = on_runtime(sandbox_spent_before_usd=0.25)
    budget.record_charge(state, "box-1", 300_000, 50_000, later(hours=1))
    figure = state.money.charges["box-1"]
    assert figure.micros == 350_000
    assert figure.estimated_usd == pytest.approx(0.25 + DEFAULT_RATE)
    assert figure.read_at == later(hours=1)


# ---- what is left ----------------------------------------------------------------------------


def test_spend_left_is_in_microdollars_and_never_below_one() -> None:
    assert budget.spend_left_micros(running(), later(hours=1)) is None  # no spend cap
    capped = Budget(max_spend_usd=50)
    state = running(spec=spec(budget=capped), budget=capped)
    assert abs(budget.spend_left_micros(state, later(hours=1)) - 49_920_000) <= 1  # type: ignore[operator]
    spent = Budget(max_spend_usd=0.01)
    over = running(spec=spec(budget=spent), budget=spent)
    assert budget.spend_left_micros(over, later(hours=1)) == 1


# ---- reading the provider's account ----------------------------------------------------------


def test_only_runtime_keeps_an_account_to_read() -> None:
    assert money.keeps_account(on_runtime())
    assert not money.keeps_account(running())


def test_the_account_is_read_first_thing_then_every_five_minutes() -> None:
    assert not money.money_due(running(), later(hours=1))  # local: an estimate only
    assert money.money_due(on_runtime(), T0)
    read = on_runtime(money_read_at=T0)
    assert not money.money_due(read, T0 + money.MONEY_READ_EVERY - timedelta(seconds=1))
    assert money.money_due(read, T0 + money.MONEY_READ_EVERY)


def test_a_money_read_records_the_current_sandboxs_charge_and_the_daily_limit() -> None:
    state = on_runtime()
    seen = MoneyRead(
        charge=SandboxCharge(sandbox_id="box-1", charged_micros=60_000, held_micros=20_000),
        daily=DailyLimitRead(
            limit_micros=5_000_000, used_micros=1_250_000, remaining_micros=3_750_000
        ),
    )
    money.take_money(state, seen, later(hours=1))
    assert state.money.money_read_at == later(hours=1)
    assert state.money.charges["box-1"].micros == 80_000
    assert state.money.charges["box-1"].read_at == later(hours=1)
    assert state.money.daily_limit is not None
    assert state.money.daily_limit.model_dump() == {
        "limit_usd": 5.0,
        "used_usd": 1.25,
        "remaining_usd": 3.75,
        "read_at": later(hours=1),
    }


def test_a_charge_for_another_sandbox_is_not_taken_for_the_current_one() -> None:
    state = on_runtime()
    seen = MoneyRead(charge=SandboxCharge(sandbox_id="box-0", charged_micros=60_000))
    money.take_money(state, seen, later(hours=1))
    assert state.money.charges == {} and state.money.daily_limit is None
    assert state.money.money_read_at == later(hours=1)


def test_a_failed_money_read_changes_nothing() -> None:
    state = on_runtime()
    money.take_money(state, None, later(hours=1))
    assert (
        state.money.money_read_at is None
        and state.money.charges == {}
        and state.money.daily_limit is None
    )


def test_a_key_without_a_daily_limit_reads_as_none_left_unlimited() -> None:
    state = on_runtime()
    money.take_daily(state, DailyLimitRead(used_micros=500_000), later(hours=1))
    assert state.money.daily_limit is not None
    assert (state.money.daily_limit.limit_usd, state.money.daily_limit.remaining_usd) == (
        None,
        None,
    )
    assert state.money.daily_limit.used_usd == 0.5


def test_the_daily_limit_has_room_while_it_covers_one_more_lease() -> None:
    state = on_runtime()
    lease = money.next_lease_micros(state)
    assert lease == 80_000  # an hour at $0.08
    assert money.daily_room(state, DailyLimitRead())  # no limit
    assert money.daily_room(state, DailyLimitRead(limit_micros=10**6, remaining_micros=lease))
    assert not money.daily_room(
        state, DailyLimitRead(limit_micros=10**6, remaining_micros=lease - 1)
    )
