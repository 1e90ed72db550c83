"""The done check's decisions (`workflows.pure.done`, `decide.after_done_checks`) and its spec
rules: pure, so each edge is cheap (the round that uses the last failed round, an extension
while a failure waits, a lease too short for a check, the spec refusing bad commands)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from overnight.core.done_check import (
    MAX_DONE_CHECK_CHARS,
    MAX_DONE_CHECKS,
    DoneCheck,
    failure_reason,
)
from overnight.core.models import Budget, BudgetExtension, RunSpec
from overnight.core.status_lines import done_check_block, done_check_line
from workflows.pure import budget, done
from workflows.pure.card import build_status, render_card
from workflows.pure.decide import (
    DoneRound,
    Finish,
    NeedsAttention,
    Restart,
    WakeInPlace,
    after_done_checks,
    decide_resume,
)
from workflows.pure.state import SupervisorState

T0 = datetime(2026, 1, 1, 22, 0, tzinfo=UTC)


def spec(**overrides: Any) -> RunSpec:
    return RunSpec(
        run_id="pure-done",
        repo="file:///tmp/repo",
        agent_dir="/tmp/agent",
        command="python3 /workspace/agent/main.py",
        **({"done_when": ["pytest -q", "ruff check ."]} | overrides),
    )


def finished_agent(**overrides: Any) -> SupervisorState:
    """A run whose agent just exited 0 in its first sandbox."""
    run_spec = overrides.pop("spec", None) or spec()
    fields: dict[str, Any] = {
        "spec": run_spec,
        "budget": run_spec.budget,
        "started_at": T0,
        "state": "running",
        "attempt": 1,
        "sandbox_id": "box-1",
        "process_id": "agent-1-0",
        "sandbox_started_at": T0,
        "lease_keeping": True,
        "lease_ends_at": T0 + timedelta(hours=1),
    }
    fields.update(overrides)
    return SupervisorState(**fields)


def check(command: str, *, passed: bool, index: int = 0, **fields: Any) -> DoneCheck:
    values: dict[str, Any] = {"exit_code": 0 if passed else 1, "seconds": 1.5, "tail": "out"}
    values.update(fields)
    return DoneCheck(command=command, index=index, round=1, passed=passed, at=T0, **values)


NOW = T0 + timedelta(minutes=30)


def test_every_check_passing_finishes_the_run() -> None:
    s = finished_agent()
    failed = done.record_round(
        s, [check("pytest -q", passed=True), check("ruff check .", passed=True, index=1)]
    )
    assert failed is None
    assert after_done_checks(s, NOW) == Finish()
    assert (s.done.done_checks_used, s.done.done_pending) == (0, None)


def test_a_failed_check_starts_the_agent_again_naming_the_check() -> None:
    s = finished_agent()
    failed = done.record_round(s, [check("pytest -q", passed=False, exit_code=2)])
    assert failed is not None and failed.command == "pytest -q"
    decision = after_done_checks(s, NOW)
    assert decision == DoneRound("done check failed: `pytest -q` (exit 2)")
    assert s.done.done_checks_used == 1


def test_a_timed_out_check_says_it_was_ended_at_its_limit() -> None:
    s = finished_agent(spec=spec(done_check_timeout_seconds=30))
    done.record_round(s, [check("pytest -q", passed=False, timed_out=True, exit_code=124)])
    assert (
        s.done.done_pending == "done check failed: `pytest -q` (timed out after 30 s and was ended)"
    )


def test_the_round_that_uses_the_last_failed_round_needs_a_person_in_place() -> None:
    s = finished_agent(spec=spec(budget=Budget(max_done_checks=3)), done_checks_used=2)
    done.record_round(s, [check("pytest -q", passed=True), check("ruff check .", passed=False)])
    decision = after_done_checks(s, NOW)
    assert decision == NeedsAttention(
        "done checks used up (3 failed rounds of 3 allowed): last, `ruff check .` (exit 1)",
        in_place=True,
    )


def test_no_done_checks_allowed_means_the_first_failure_needs_a_person() -> None:
    s = finished_agent(spec=spec(budget=Budget(max_done_checks=0)))
    done.record_round(s, [check("pytest -q", passed=False)])
    decision = after_done_checks(s, NOW)
    assert isinstance(decision, NeedsAttention)
    assert "(1 failed round of 0 allowed)" in decision.reason


def test_hours_used_up_after_a_failed_round_need_a_person_with_the_failure_kept() -> None:
    s = finished_agent(spec=spec(budget=Budget(max_hours=0.25)))
    done.record_round(s, [check("pytest -q", passed=False)])
    decision = after_done_checks(s, NOW)
    assert isinstance(decision, NeedsAttention) and decision.in_place
    assert decision.reason.startswith("hours budget used up")
    assert s.done.done_pending is not None


def test_an_extension_while_a_failure_waits_starts_the_agent_again_with_it() -> None:
    s = finished_agent(spec=spec(budget=Budget(max_done_checks=1)))
    done.record_round(s, [check("pytest -q", passed=False)])
    assert isinstance(after_done_checks(s, NOW), NeedsAttention)
    s.sandbox.paused_in_place = True
    # Only hours: still out of failed rounds.
    s.budget = budget.extended(s.budget, BudgetExtension(hours=1))
    still = decide_resume(s, NOW)
    assert isinstance(still, NeedsAttention) and "done checks used up" in still.reason
    s.budget = budget.extended(s.budget, BudgetExtension(done_checks=1))
    assert decide_resume(s, NOW) == DoneRound("done check failed: `pytest -q` (exit 1)")


def test_a_paused_in_place_run_without_a_pending_failure_wakes_as_before() -> None:
    s = finished_agent(paused_in_place=True)
    assert decide_resume(s, NOW) == WakeInPlace()
    s.sandbox_id = None
    s.sandbox.paused_in_place = False
    s.done.done_pending = "done check failed: `x` (exit 1)"
    assert isinstance(decide_resume(s, NOW), Restart)


def test_a_lease_shorter_than_a_check_is_extended_to_hold_it() -> None:
    s = finished_agent(lease_ends_at=NOW + timedelta(minutes=5))
    target = done.lease_target(s, NOW)
    assert target == NOW + timedelta(seconds=600) + done.CHECK_LEASE_MARGIN
    s.sandbox.lease_ends_at = NOW + timedelta(hours=1)
    assert done.lease_target(s, NOW) is None
    s.sandbox.lease_keeping = False
    s.sandbox.lease_ends_at = NOW
    assert done.lease_target(s, NOW) is None


def test_a_failed_reason_names_a_long_command_on_one_short_line() -> None:
    long = "pytest -q \\\n  " + "tests/very/long/path " * 30
    reason = failure_reason(check(long, passed=False), 600)
    assert "\n" not in reason and len(reason) < 260 and reason.endswith("...` (exit 1)")


def test_the_card_and_status_show_the_round_and_the_failed_checks_output() -> None:
    s = finished_agent()
    done.record_round(
        s,
        [
            check("pytest -q", passed=True),
            check("ruff check .", passed=False, index=1, tail="E501 line too long"),
        ],
    )
    status = build_status(s, NOW)
    assert status.done_checks_used == 1 and len(status.done_checks) == 2
    line = done_check_line(status)
    assert line == (
        "round 1: `ruff check .` failed (exit 1) after 1 passed · 1 of 3 failed rounds used"
    )
    assert done_check_block(status, 15) == "$ ruff check .\nE501 line too long"
    card = render_card(status, NOW)
    assert "**done check**" in card and "E501 line too long" in card


def test_a_passing_round_shows_every_checks_tail() -> None:
    s = finished_agent()
    done.record_round(
        s,
        [
            check("pytest -q", passed=True, tail="3 passed"),
            check("ruff check .", passed=True, index=1, tail="All checks passed!"),
        ],
    )
    status = build_status(s, NOW)
    assert done_check_line(status) == "round 1: 2 passed (3.0 s) · 0 of 3 failed rounds used"
    assert done_check_block(status, 15) == (
        "$ pytest -q\n3 passed\n$ ruff check .\nAll checks passed!"
    )


@pytest.mark.parametrize(
    ("done_when", "wrong"),
    [
        (["pytest", "  "], "done_when command 2 is empty"),
        ([""], "done_when command 1 is empty"),
        (["x" * (MAX_DONE_CHECK_CHARS + 1)], "longer than"),
        (["true"] * (MAX_DONE_CHECKS + 1), "at most"),
        (["echo \x00"], "NUL"),
        ("pytest -q", "list"),
    ],
)
def test_the_spec_refuses_bad_done_when_before_anything_starts(done_when: Any, wrong: str) -> None:
    fields = {
        "run_id": "x",
        "repo": "file:///tmp/repo",
        "agent_dir": "/tmp/a",
        "command": "true",
        "done_when": done_when,
    }
    with pytest.raises(ValidationError) as refused:
        RunSpec.model_validate(fields)
    assert wrong in str(refused.value)
    assert "done_when" in str(refused.value)


@pytest.mark.parametrize("seconds", [0, -1, 3001, float("inf")])
def test_the_spec_refuses_a_check_time_limit_out_of_bounds(seconds: float) -> None:
    with pytest.raises(ValidationError, match="done_check_timeout_seconds"):
        spec(done_check_timeout_seconds=seconds)


def test_the_budget_bounds_failed_rounds_and_an_extension_adds_them() -> None:
    with pytest.raises(ValidationError, match="max_done_checks"):
        spec(budget=Budget(max_done_checks=1001))
    assert Budget().max_done_checks == 3
    assert not BudgetExtension(done_checks=2).is_empty()
    assert budget.extended(Budget(), BudgetExtension(done_checks=2)).max_done_checks == 5


def test_in_place_checks_come_first_and_done_when_joins_them_only_without_its_own_sandbox() -> None:
    s = finished_agent(spec=spec(done_when_in_place=["curl -f localhost:8000"]))
    assert [(c.index, c.in_place) for c in done.in_place_checks(s, fresh=True)] == [(0, True)]
    assert [(c.index, c.in_place) for c in done.in_place_checks(s, fresh=False)] == [
        (0, True),
        (0, False),
        (1, False),
    ]
    assert done.wanted(finished_agent(spec=spec(done_when=[], done_when_in_place=["true"])))
    assert not done.wanted(finished_agent(spec=spec(done_when=[])))


def test_a_check_sandbox_lease_shorter_than_a_check_is_extended_to_hold_it() -> None:
    held = done.check_lease_target(NOW + timedelta(hours=1), 600, NOW)
    assert held is None
    short = done.check_lease_target(NOW + timedelta(minutes=5), 600, NOW)
    assert short == NOW + timedelta(seconds=600) + done.CHECK_LEASE_MARGIN
    assert done.check_lease_target(None, 600, NOW) is None


def test_work_that_could_not_be_checked_is_a_failed_round_saying_why() -> None:
    s = finished_agent()
    why = "the work was not checked: the origin has no such ref"
    failed = done.record_round(s, [done.unchecked(s, 1, why, NOW)])
    assert failed is not None and failed.command == "pytest -q" and failed.exit_code is None
    assert s.done.done_pending == f"done check failed: `pytest -q` ({why})"
    assert done_check_line(build_status(s, NOW)) == (
        f"round 1: `pytest -q` failed ({why}) · 1 of 3 failed rounds used"
    )


def test_a_check_sandbox_costs_its_life_at_the_spec_rates() -> None:
    s = finished_agent()
    before = budget.estimated_spend_usd(s, NOW)
    done.close_check_spend(s, 3600)
    assert budget.estimated_spend_usd(s, NOW) - before == pytest.approx(
        budget.hourly_rate_usd(s.spec)
    )


def test_done_when_in_place_is_held_to_the_same_rules_and_shares_the_bound() -> None:
    with pytest.raises(ValidationError, match="done_when_in_place command 1 is empty"):
        spec(done_when_in_place=[" "])
    half = MAX_DONE_CHECKS // 2 + 1
    with pytest.raises(ValidationError, match="together"):
        spec(done_when=["true"] * half, done_when_in_place=["true"] * half)


def test_a_check_sandbox_lease_ending_just_when_the_check_would_fits() -> None:
    needed = timedelta(seconds=600) + done.CHECK_LEASE_MARGIN
    assert done.check_lease_target(NOW + needed, 600, NOW) is None
    assert done.check_lease_target(NOW + needed - timedelta(seconds=1), 600, NOW) == NOW + needed


def test_unchecked_work_fails_the_first_check_with_why_as_its_output() -> None:
    s = finished_agent()
    why = "the work was not checked: it could not be pushed"
    failed = done.unchecked(s, 2, why, NOW)
    assert (failed.command, failed.index, failed.round, failed.passed) == ("pytest -q", 0, 2, False)
    assert (failed.tail, failed.problem, failed.at) == (why, why, NOW)


def test_each_check_sandboxs_life_adds_to_the_spend_and_none_is_below_nothing() -> None:
    s = finished_agent(closed_spend_usd=1.0)
    done.close_check_spend(s, 1800)
    done.close_check_spend(s, 1800)
    assert s.money.closed_spend_usd == pytest.approx(1.0 + budget.hourly_rate_usd(s.spec))
    done.close_check_spend(s, 0)
    done.close_check_spend(s, -5)  # a clock that went back: nothing
    assert s.money.closed_spend_usd == pytest.approx(1.0 + budget.hourly_rate_usd(s.spec))


def test_used_up_rounds_of_a_run_carried_over_without_its_results_say_the_failure() -> None:
    s = finished_agent(
        done_checks_used=3, done_pending="done check failed: `pytest -q` (exit 1)", done_results=[]
    )
    assert done.verdict(s, NOW) == "done checks used up: done check failed: `pytest -q` (exit 1)"
    s.done.done_results = [check("pytest -q", passed=True)]
    assert done.verdict(s, NOW) == "done checks used up: done check failed: `pytest -q` (exit 1)"


def test_used_up_rounds_name_the_last_timed_out_check_with_its_limit() -> None:
    s = finished_agent(spec=spec(done_check_timeout_seconds=45), done_checks_used=2)
    done.record_round(s, [check("pytest -q", passed=False, timed_out=True, exit_code=124)])
    assert done.verdict(s, NOW) == (
        "done checks used up (3 failed rounds of 3 allowed): last, `pytest -q` "
        "(timed out after 45 s and was ended)"
    )
