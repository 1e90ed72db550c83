"""What `decide` makes of what the agent does beyond running: asking through the kit, waiting
past its wait budget, spending the budget out while it runs, looping, exiting with a command
that is not there; and of a host taken as lost."""

from __future__ import annotations

import json
from typing import Any

from activities.models import Observation
from overnight.core.agent_requests import AskRequest
from overnight.core.agent_spec import LOOP_EXIT_CODE
from overnight.core.checkpoint_text import facts_of
from overnight.core.models import Budget
from tests.workflows.pure.test_decide import DEFAULT_RATE, exited, later, running, spec, working
from workflows.pure.decide import (
    AskPerson,
    FailRun,
    HostLost,
    NeedsAttention,
    PauseUntil,
    Restart,
    Watch,
    decide,
    is_loop,
    loop_reason,
    next_wake,
)
from workflows.pure.state import SupervisorState

ASK = {"id": "q1-abc", "question": "Merge?", "choices": ["yes", "no"]}
LOST = "host lost: a's queue overnight@a had no worker for 180 s (no poller listed)"


def kit_agent(requests: dict[str, Any] | None = None, **overrides: Any) -> SupervisorState:
    """A run of an agent that speaks the kit's protocol, its checkpoint holding `requests`."""
    state = running(agent_requests=True, wait_budget_kept=True, **overrides)
    if requests is not None:
        state.progress.checkpoint_facts = facts_of(json.dumps({"step": 1, "overnight": requests}))
    return state


# ---- the kit ---------------------------------------------------------------------------------


def test_a_question_or_a_wait_from_the_agent_is_acted_on_at_once() -> None:
    state = kit_agent({"ask": ASK})
    assert decide(state, working(), later(minutes=5)) == AskPerson(AskRequest(**ASK))
    assert next_wake(state, later(minutes=5)) == later(minutes=5)
    waits = kit_agent({"wait": {"id": "w1", "until": later(hours=3).isoformat()}})
    assert next_wake(waits, later(minutes=5)) == later(minutes=5)


def test_a_wait_pauses_the_sandbox_for_what_is_left_of_the_wait_budget() -> None:
    far = later(hours=30).isoformat()
    state = kit_agent({"wait": {"id": "w1", "until": far}}, budget=Budget(max_wait_hours=2))
    state.kit.waited_seconds = 1800.0
    decision = decide(state, working(), later(hours=1))
    assert isinstance(decision, PauseUntil) and decision.until == later(hours=2, minutes=30)


def test_a_wait_past_its_used_up_budget_needs_a_person_in_place() -> None:
    far = later(hours=30).isoformat()
    state = kit_agent({"wait": {"id": "w1", "until": far}}, budget=Budget(max_wait_hours=1))
    state.kit.waited_seconds = 3600.0
    assert decide(state, working(), later(hours=1)) == NeedsAttention(
        "wait budget used up (1.00 of 1 h paused for questions and waits)", in_place=True
    )
    # A pause still under way counts up to now.
    state.kit.waited_seconds, state.kit.waiting_since = 1800.0, later(minutes=30)
    assert decide(state, working(), later(hours=1, minutes=15)) == NeedsAttention(
        "wait budget used up (1.25 of 1 h paused for questions and waits)", in_place=True
    )


# ---- the budget running out under a running agent --------------------------------------------


def capped(**budget: Any) -> dict[str, Any]:
    """A budget, and an agent that checkpointed a minute before the hour (not stalled)."""
    limits = Budget(**budget)
    return {"spec": spec(budget=limits), "budget": limits, "progress_at": later(minutes=59)}


def test_spend_run_out_under_a_kit_agent_pauses_it_in_place() -> None:
    state = kit_agent(**capped(max_spend_usd=DEFAULT_RATE / 2, max_hours=10))
    decision = decide(state, working(), later(hours=1))
    assert decision == NeedsAttention("spend budget used up ($0.08 of $0.04)", in_place=True)
    # With half an hour of run hours left, it is still held in place.
    short = kit_agent(**capped(max_spend_usd=DEFAULT_RATE / 2, max_hours=1.5))
    assert decide(short, working(), later(hours=1)) == NeedsAttention(
        "spend budget used up ($0.08 of $0.04)", in_place=True
    )


def test_hours_run_out_set_the_agent_aside_as_before_and_so_does_an_agent_without_the_kit() -> None:
    state = kit_agent(**capped(max_hours=1))
    assert decide(state, working(), later(hours=1)) == NeedsAttention(
        "hours budget used up (1.00 of 1 h)"
    )
    plain = running(**capped(max_spend_usd=DEFAULT_RATE / 2, max_hours=10))
    assert decide(plain, working(), later(hours=1)) == NeedsAttention(
        "spend budget used up ($0.08 of $0.04)"
    )


# ---- a coding agent's loop, a command not there, a lost host ---------------------------------


def test_a_coding_agents_loop_restarts_it_naming_what_its_adapter_noted() -> None:
    noted = json.dumps({"next": "fix the test", "notes": ["ran pytest 40 times"]})
    state = running(loop_exit=True, checkpoint=noted)
    reason = "agent looped: ran pytest 40 times"
    assert decide(state, exited(LOOP_EXIT_CODE), later(minutes=5)) == Restart(reason)
    assert loop_reason(state) == reason and is_loop(state, reason)


def test_a_loop_with_no_note_is_named_by_its_exit_code() -> None:
    state = running(loop_exit=True, checkpoint="plain text")
    reason = f"agent looped (exit {LOOP_EXIT_CODE}: the same tool call over and over)"
    assert decide(state, exited(LOOP_EXIT_CODE), later(minutes=5)) == Restart(reason)
    # The facts taken with the checkpoint are read, not the text again.
    state.progress.checkpoint_facts = facts_of(json.dumps({"notes": ["kept note"]}))
    assert loop_reason(state) == "agent looped: kept note"


def test_an_agent_not_run_by_the_adapter_exiting_76_has_crashed() -> None:
    state = running()
    assert decide(state, exited(LOOP_EXIT_CODE), later(minutes=5)) == Restart(
        f"agent crashed (exit {LOOP_EXIT_CODE})"
    )
    assert not is_loop(state, "agent looped: ran pytest 40 times")
    assert not is_loop(running(loop_exit=True), "agent crashed (exit 1)")


def test_a_command_not_found_at_its_first_start_fails_the_run() -> None:
    decision = decide(running(fail_fast=True), exited(127), later(minutes=1))
    assert isinstance(decision, FailRun) and "was not found (exit 127" in decision.reason


def test_a_lost_host_restarts_the_run_elsewhere_within_the_budget() -> None:
    assert decide(running(), HostLost(LOST), later(minutes=5)) == Restart(LOST)
    spent = running(restarts_used=5)
    assert decide(spent, HostLost(LOST), later(minutes=5)) == NeedsAttention(
        "restart budget used up (5 of 5)", pending_restart=LOST
    )
    hours = running(**capped(max_hours=1))
    decision = decide(hours, HostLost(LOST), later(hours=1))
    assert isinstance(decision, NeedsAttention) and decision.pending_restart == LOST


def test_a_kit_agent_looked_at_with_nothing_new_is_watched() -> None:
    seen = Observation(process_state="running", sandbox_state="running")
    assert isinstance(decide(kit_agent(), seen, later(minutes=1)), Watch)
