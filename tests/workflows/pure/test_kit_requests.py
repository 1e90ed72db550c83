"""The kit's requests, workflow side (workflows.pure.kit_requests): pure, no server.
A request is acted on
once per sandbox; an answered question is answered again without a pause; a wait is capped by
the hours left; model spend counts once per stream, in the spend budget; paused time is not
run time."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from overnight.agent_requests import AskRequest
from overnight.checkpoint_text import facts_of
from overnight.models import Budget
from tests.workflows.harness import make_spec
from workflows.pure import budget, kit_requests
from workflows.pure.state import SupervisorState

NOW = datetime(2026, 12, 1, 2, tzinfo=UTC)
ASK = {"id": "q1-abc", "question": "Go?", "choices": ["yes", "no"]}


def state(**requests: Any) -> SupervisorState:
    spec = make_spec(budget=Budget(max_spend_usd=10, max_hours=8))
    s = SupervisorState(
        spec=spec, budget=spec.budget, started_at=NOW, agent_requests=True, sandbox_id="box-1"
    )
    taken(s, **requests)
    return s


def taken(s: SupervisorState, **requests: Any) -> None:
    s.checkpoint_facts = facts_of(json.dumps({"step": 1, "overnight": requests}))
    kit_requests.take_requests(s)


def test_a_question_is_asked_once_per_sandbox_and_answered_again_without_a_pause() -> None:
    s = state(ask=ASK)
    asked = kit_requests.request_due(s, NOW, 8)
    assert isinstance(asked, kit_requests.AskPerson) and asked.request.id == "q1-abc"
    s.request_handled = kit_requests.handled_key(s, "q1-abc")
    assert kit_requests.request_due(s, NOW, 8) is None
    s.answers["q1-abc"] = "yes"
    s.sandbox_id = "box-2"  # a restart: the new agent asks again
    assert kit_requests.request_due(s, NOW, 8) == kit_requests.DeliverAnswer("q1-abc", "yes")


def test_an_answered_question_beside_a_far_wait_is_acted_on_once_each() -> None:
    """Agent bytes can hold both. With one mark for both they took turns for ever: the answer
    again, then a pause for the hours left (not run time, so never fewer), again and again."""
    far = (NOW + timedelta(days=400)).isoformat()
    s = state(ask=ASK, wait={"id": "w1-far", "until": far, "reason": "window"})
    s.talk_marks_apart = True
    s.answers["q1-abc"] = "yes"
    acted = []
    for _ in range(4):
        due = kit_requests.request_due(s, NOW, 8)
        if due is None:
            break
        acted.append(type(due).__name__)
        if isinstance(due, kit_requests.DeliverAnswer):
            s.request_handled = kit_requests.handled_key(s, due.request_id)
        elif isinstance(due, kit_requests.PauseUntil):
            kit_requests.mark_wait(s, due.request.id)
    assert acted == ["DeliverAnswer", "PauseUntil"]
    # Runs begun before the marks were kept apart still take turns (their histories replay).
    s.talk_marks_apart, s.request_handled, s.wait_handled = False, None, None
    first = kit_requests.request_due(s, NOW, 8)
    assert isinstance(first, kit_requests.DeliverAnswer)
    s.request_handled = kit_requests.handled_key(s, first.request_id)
    second = kit_requests.request_due(s, NOW, 8)
    assert isinstance(second, kit_requests.PauseUntil)
    kit_requests.mark_wait(s, second.request.id)
    assert isinstance(kit_requests.request_due(s, NOW, 8), kit_requests.DeliverAnswer)


def test_runs_without_the_patch_ignore_requests() -> None:
    s = state(ask=ASK, usage={"stream": "a", "usd": 3})
    s.agent_requests = False
    assert kit_requests.request_due(s, NOW, 8) is None


def test_a_wait_is_capped_by_the_hours_left_and_short_ones_are_slept_through() -> None:
    far = (NOW + timedelta(hours=20)).isoformat()
    s = state(wait={"id": "w1-a", "until": far, "reason": "window"})
    due = kit_requests.request_due(s, NOW, 3)
    assert isinstance(due, kit_requests.PauseUntil) and due.until == NOW + timedelta(hours=3)
    soon = (NOW + timedelta(seconds=10)).isoformat()
    assert kit_requests.request_due(state(wait={"id": "w1-b", "until": soon}), NOW, 3) is None


def test_model_spend_counts_once_per_stream_in_the_spend_budget() -> None:
    s = state(usage={"stream": "a1-p1-0", "usd": 4})
    taken(s, usage={"stream": "a1-p1-0", "usd": 4})  # read twice: once
    taken(s, usage={"stream": "a1-p1-0", "usd": 3})  # an older report: nothing
    taken(s, usage={"stream": "a2-p9-5", "usd": 7})  # the next attempt's process
    assert kit_requests.model_usd(s) == 11
    assert budget.spend_usd(s, NOW) == 11
    assert budget.estimated_spend_usd(s, NOW) == 0
    assert budget.exhausted_reason(s, NOW) == "spend budget used up ($11.00 of $10.00)"


def test_paused_time_is_not_run_time() -> None:
    s = state()
    s.waiting_since = NOW
    later = NOW + timedelta(hours=5)
    assert budget.hours_used(s, later) == 0
    s.waited_seconds, s.waiting_since = 5 * 3600, None
    assert budget.hours_used(s, later + timedelta(hours=1)) == 1


def test_the_card_and_the_status_show_the_question_the_wait_the_spend_and_the_results() -> None:
    from overnight.cli.render import status_text
    from workflows.pure.card import build_status, render_card

    s = state(
        usage={"stream": "a1-p1-0", "usd": 2.5, "input_tokens": 7},
        finish={"summary": "done", "outputs": {"pr": "https://example.test/pr/3"}},
    )
    s.question = AskRequest(**ASK)
    s.waiting_since = NOW
    s.state = "waiting_for_answer"
    status = build_status(s, NOW)
    card = render_card(status, NOW)
    text = status_text(status, now=NOW, ui_url=None)

    assert status.spend_model_usd == 2.5 and status.spend_usd == 2.5
    assert status.talk is not None and status.talk.model_input_tokens == 7
    assert "- **question** Go? (one of: yes, no)" in card
    assert "- **model spend** $2.50 (in the spend above)" in card
    assert "- **output pr** https://example.test/pr/3" in card
    assert "question:      Go? (one of: yes, no)" in text
    assert "result:        done" in text


def test_the_card_shows_agent_text_on_its_own_line_and_a_wait_in_utc() -> None:
    """Choices and a wait's reason are agent text: a newline in them would forge card lines;
    an `until` in another zone is shown in UTC, as it says."""
    from workflows.pure.card import build_status, render_card

    forged = "\n- **result** all tests pass"
    s = state(wait={"id": "w1-a", "until": "2026-12-01T13:30:00+10:00", "reason": "x" + forged})
    assert s.checkpoint_facts is not None and s.checkpoint_facts.requests is not None
    s.wait = s.checkpoint_facts.requests.wait
    assert s.wait is not None
    s.waiting_until = s.wait.until
    card = render_card(build_status(s, NOW), NOW)
    assert "- **paused until** 2026-12-01 03:30 UTC: x - \\*\\*result\\*\\* all tests pass" in card
    s.wait = s.waiting_until = None
    s.question = AskRequest(id="q1", question="Go?", choices=["yes" + forged, "no"])
    card = render_card(build_status(s, NOW), NOW)
    assert forged not in card
    assert "(one of: yes - \\*\\*result\\*\\* all tests pass, no)" in card


def test_the_card_shows_agent_text_as_written_never_as_a_link_or_emphasis() -> None:
    """The card is Markdown in the operator's Web UI: an agent's `[Approve](https://...)`
    would be a link there, with the agent's words on it."""
    from workflows.pure.card import build_status, render_card

    phish = "[Approve the deploy](https://evil.example/login) **now**"
    s = state(finish={"summary": phish, "outputs": {"next_pr": "<https://evil.example>"}})
    s.checkpoint_facts = facts_of(json.dumps({"step": 2, "next": f"{phish}\n# heading"}))
    card = render_card(build_status(s, NOW), NOW)
    shown = "\\[Approve the deploy\\](https://evil.example/login) \\*\\*now\\*\\*"
    assert f"- **result** {shown}" in card
    assert "- **output next\\_pr** \\<https://evil.example\\>" in card
    assert f"- **next step** {shown} # heading" in card
    # Every bracket and angle bracket in the card is escaped: no link, image or autolink.
    assert re.search(r"(?<!\\)[\[<]", card) is None
