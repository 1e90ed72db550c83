"""`decide_resume` after a person's extension: a run paused where it stands wakes in place (or
waits on if still short), and a restart counted when it was decided (its create then failed)
is tried again without counting it twice."""

from __future__ import annotations

import json

from overnight.core.checkpoint_text import facts_of
from overnight.core.models import Budget
from tests.workflows.pure.test_decide import later, running, spec
from workflows.pure.decide import NeedsAttention, Restart, WakeInPlace, decide_resume
from workflows.pure.state import SupervisorState

CRASH = "agent crashed (exit 1)"


def in_place(**overrides: object) -> SupervisorState:
    """A kit agent's run whose spend ran out: its sandbox paused where it stands."""
    capped = Budget(max_spend_usd=1, max_hours=10)
    fields: dict[str, object] = {
        "spec": spec(budget=capped),
        "budget": capped,
        "agent_requests": True,
        "wait_budget_kept": True,
        "paused_in_place": True,
    }
    return running(**(fields | overrides))


def test_a_run_paused_in_place_wakes_where_it_stands_once_extended() -> None:
    assert decide_resume(in_place(), later(hours=1)) == WakeInPlace()


def test_a_run_paused_in_place_and_still_short_waits_on_in_place() -> None:
    decision = decide_resume(in_place(closed_spend_usd=2.0), later(hours=1))
    assert decision == NeedsAttention("spend budget used up ($2.08 of $1.00)", in_place=True)


def test_a_run_paused_in_place_whose_agent_waits_past_its_wait_budget_waits_on_in_place() -> None:
    until = later(hours=8).isoformat()
    state = in_place(budget=Budget(max_spend_usd=10, max_hours=10, max_wait_hours=1))
    state.kit.waited_seconds = 3600.0
    state.progress.checkpoint_facts = facts_of(
        json.dumps({"overnight": {"wait": {"id": "w1-a", "until": until, "reason": "window"}}})
    )
    decision = decide_resume(state, later(hours=1))
    assert decision == NeedsAttention(
        "wait budget used up (1.00 of 1 h paused for questions and waits)", in_place=True
    )
    # A pause still under way counts up to now.
    state.kit.waited_seconds, state.kit.waiting_since = 1800.0, later(minutes=30)
    assert decide_resume(state, later(hours=1, minutes=15)) == NeedsAttention(
        "wait budget used up (1.25 of 1 h paused for questions and waits)", in_place=True
    )


def test_a_restart_counted_when_decided_is_tried_again_without_counting() -> None:
    state = running(sandbox_id=None, pending_restart=CRASH, pending_counted=True, restarts_used=5)
    # Its restart was counted, and the budget allows none more: an extension of any kind
    # (here more hours) tries its create again.
    assert decide_resume(state, later(hours=1)) == Restart(CRASH, counted=False)


def test_a_counted_restart_still_short_of_budget_waits_with_it_pending() -> None:
    state = running(
        sandbox_id=None,
        pending_restart=CRASH,
        pending_counted=True,
        attention_since=later(hours=24),
    )
    decision = decide_resume(state, later(hours=30))
    assert decision == NeedsAttention("hours budget used up (24.00 of 24 h)", pending_restart=CRASH)
