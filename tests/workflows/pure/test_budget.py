"""The wait budget (workflows/pure/budget.py): time paused for the agent's questions and waits
has a budget of its own (`Budget.max_wait_hours`), apart from the run hours, and an extension
adds to it."""

from __future__ import annotations

from overnight.core.models import Budget, BudgetExtension
from tests.workflows.pure.test_decide import later, running
from workflows.pure import budget


def test_time_paused_for_questions_and_waits_is_counted_in_hours() -> None:
    state = running(waited_seconds=1800.0, waiting_since=later(hours=2, minutes=30))
    assert budget.wait_hours_used(state, later(hours=3)) == 1.0
    assert budget.hours_used(state, later(hours=3)) == 2.0  # and not as run time


def test_the_next_pause_may_last_what_is_left_of_the_wait_budget() -> None:
    state = running(
        wait_budget_kept=True,
        budget=Budget(max_wait_hours=4),
        waited_seconds=1800.0,
        waiting_since=later(hours=2, minutes=30),
    )
    assert budget.wait_room_hours(state, later(hours=3)) == 3.0
    assert budget.wait_room_hours(state, later(hours=8)) == 0.0  # used up: none, not less


def test_a_run_begun_before_the_wait_budget_may_pause_for_its_run_hours_left() -> None:
    state = running(budget=Budget(max_hours=10, max_wait_hours=1), waited_seconds=3600.0)
    assert budget.wait_room_hours(state, later(hours=4)) == 7.0


def test_a_used_up_wait_budget_says_how_much_was_paused_of_how_much() -> None:
    state = running(
        budget=Budget(max_wait_hours=1.5), waited_seconds=1980.0, waiting_since=later(hours=2)
    )
    assert budget.wait_exhausted_reason(state, later(hours=3)) == (
        "wait budget used up (1.55 of 1.5 h paused for questions and waits)"
    )


def test_an_extension_adds_to_every_part_of_the_budget() -> None:
    before = Budget(max_restarts=5, max_hours=8, max_spend_usd=10, max_wait_hours=12)
    more = BudgetExtension(restarts=1, hours=2, spend_usd=5, wait_hours=6, done_checks=2)
    assert budget.extended(before, more) == Budget(
        max_restarts=6, max_hours=10, max_spend_usd=15, max_wait_hours=18, max_done_checks=5
    )
    uncapped = budget.extended(Budget(), BudgetExtension(spend_usd=5))
    assert uncapped.max_spend_usd is None  # no cap stays no cap
