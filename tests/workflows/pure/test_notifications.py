"""What a run's webhooks are told (workflows/pure/notifications.py): the payload of one state
change, built from the state at one moment, and the text of a run that needs a person."""

from __future__ import annotations

from typing import Any

import pytest

from overnight.core.agent_requests import RunOutputs
from overnight.core.checkpoint_text import facts_of
from overnight.core.models import Budget, LastWords
from overnight.core.notify_spec import Webhook
from tests.workflows.pure.test_decide import T0, later, running, spec
from workflows.pure.notifications import attention_text, notification
from workflows.pure.state import SupervisorState

HOOK = Webhook(url="https://hooks.example/run", on_restart=True)


def told(**overrides: Any) -> SupervisorState:
    """A run with a webhook and a secret, on its 3rd notification, 2 restarts in."""
    run_spec = spec(notify=[HOOK], secret_env=["API_KEY"], budget=Budget(max_restarts=5))
    fields: dict[str, Any] = {
        "spec": run_spec,
        "notifications_sent": 3,
        "attempt": 3,
        "restarts_used": 2,
    }
    return running(**(fields | overrides))


def test_a_notification_says_which_change_of_which_run_it_tells_of() -> None:
    sent = notification(told(state="restarting"), "restart", "agent crashed (exit 1)", later())
    assert sent.event_id == "pure-3"  # the same on every retry of this one
    assert (sent.event, sent.run_id, sent.state) == ("restart", "pure", "restarting")
    assert (sent.reason, sent.at) == ("agent crashed (exit 1)", later())
    assert (sent.attempt, sent.restarts_used) == (3, 2)
    assert sent.webhooks == [HOOK] and sent.secret_env == ["API_KEY"]


def test_it_says_what_the_run_used_and_what_is_left_to_four_places() -> None:
    capped = Budget(max_restarts=5, max_hours=2, max_spend_usd=1)
    state = told(budget=capped)
    sent = notification(state, "restart", "why", later(minutes=20))
    assert sent.budget == capped
    assert sent.hours_used == 0.3333 and sent.spend_usd == 0.0267  # $0.08 an hour
    assert sent.budget_left.restarts == 3
    assert sent.budget_left.hours == 1.6667
    assert sent.budget_left.spend_usd == 0.9733


def test_what_is_left_is_never_below_zero_and_no_spend_cap_leaves_no_figure() -> None:
    spent = told(budget=Budget(max_restarts=1, max_hours=1, max_spend_usd=0.05), restarts_used=4)
    sent = notification(spent, "needs_attention", "budget", later(hours=3))
    assert (sent.budget_left.restarts, sent.budget_left.hours) == (0, 0.0)
    assert sent.budget_left.spend_usd == 0.0
    uncapped = notification(told(), "restart", "why", later(hours=3))
    assert uncapped.budget_left.spend_usd is None


def test_it_carries_the_checkpoints_next_step_and_the_agents_last_words() -> None:
    checkpoint = '{"next": "write the parser", "notes": ["read the spec"]}'
    words = LastWords(attempt=2, reason="agent crashed (exit 1)", at=T0, tail="Traceback ...")
    sent = notification(
        told(checkpoint=checkpoint, last_words=words), "restart", "why", later(minutes=1)
    )
    assert sent.next_step == "write the parser"
    assert (sent.output_tail, sent.output_attempt) == ("Traceback ...", 2)
    # The facts taken with the checkpoint are read, not the text again.
    kept = told(checkpoint=checkpoint, checkpoint_facts=facts_of('{"next": "kept"}'))
    assert notification(kept, "restart", "why", later()).next_step == "kept"


def test_with_no_checkpoint_summary_and_no_last_words_it_says_none() -> None:
    sent = notification(told(checkpoint="plain text"), "restart", "why", later())
    assert (sent.next_step, sent.output_tail, sent.output_attempt) == (None, None, None)


def test_a_finish_says_what_the_agent_handed_over() -> None:
    outputs = RunOutputs(summary="parser written", values={"pr": "#12", "tests": "41 passed"})
    sent = notification(told(outputs=outputs), "finished", "agent finished", later())
    assert sent.reason == "agent finished; parser written; pr: #12; tests: 41 passed"
    assert sent.outputs == outputs
    values_only = RunOutputs(values={"pr": "#12"})
    sent = notification(told(outputs=values_only), "finished", "agent finished", later())
    assert sent.reason == "agent finished; pr: #12"
    nothing = notification(told(), "finished", "agent finished", later())
    assert (nothing.reason, nothing.outputs) == ("agent finished", None)


@pytest.mark.parametrize("event", ["restart", "needs_attention", "failed", "cancelled"])
def test_only_a_finish_carries_the_outputs(event: Any) -> None:
    outputs = RunOutputs(summary="half done", values={"pr": "#12"})
    sent = notification(told(outputs=outputs), event, "why", later())
    assert (sent.reason, sent.outputs) == ("why", None)


def test_attention_text_says_the_restart_that_was_due_before_what_ran_out() -> None:
    budget = "restart budget used up (5 of 5)"
    assert attention_text(budget, "agent crashed (exit 1)") == f"agent crashed (exit 1); {budget}"
    assert attention_text(budget, None) == budget
    assert attention_text(budget, "") == budget
    assert attention_text(budget, budget) == budget  # said once
