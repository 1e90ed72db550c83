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

from overnight.core.agent_requests import AgentRequests, AskRequest, ModelUsage
from overnight.core.checkpoint_text import facts_of
from overnight.core.models import Budget
from tests.workflows.harness import make_spec
from tests.workflows.pure.fields import put
from workflows.pure import budget, kit_requests
from workflows.pure.state import SupervisorState

NOW = datetime(2026, 12, 1, 2, tzinfo=UTC)
ASK = {"id": "q1-abc", "question": "Go?", "choices": ["yes", "no"]}


def state(**requests: Any) -> SupervisorState:
    spec = make_spec(budget=Budget(max_spend_usd=10, max_hours=8))
    s = SupervisorState(spec=spec, budget=spec.budget, started_at=NOW, sandbox_id="box-1")
    s.kit.agent_requests = True
    taken(s, **requests)
    return s


def taken(s: SupervisorState, **requests: Any) -> None:
    s.progress.checkpoint_facts = facts_of(json.dumps({"step": 1, "overnight": requests}))
    kit_requests.take_requests(s)


def test_a_question_is_asked_once_per_sandbox_and_answered_again_without_a_pause() -> None:
    s = state(ask=ASK)
    asked = kit_requests.request_due(s, NOW, 8)
    assert isinstance(asked, kit_requests.AskPerson) and asked.request.id == "q1-abc"
    s.kit.request_handled = kit_requests.handled_key(s, "q1-abc")
    assert kit_requests.request_due(s, NOW, 8) is None
    s.kit.answers["q1-abc"] = "yes"
    s.sandbox_id = "box-2"  # a restart: the new agent asks again
    assert kit_requests.request_due(s, NOW, 8) == kit_requests.DeliverAnswer("q1-abc", "yes")


def test_an_answered_question_beside_a_far_wait_is_acted_on_once_each() -> None:
    """Agent bytes can hold both. With one mark for both they took turns for ever: the answer
    again, then a pause for the hours left (not run time, so never fewer), again and again."""
    far = (NOW + timedelta(days=400)).isoformat()
    s = state(ask=ASK, wait={"id": "w1-far", "until": far, "reason": "window"})
    s.kit.talk_marks_apart = True
    s.kit.answers["q1-abc"] = "yes"
    acted = []
    for _ in range(4):
        due = kit_requests.request_due(s, NOW, 8)
        if due is None:
            break
        acted.append(type(due).__name__)
        if isinstance(due, kit_requests.DeliverAnswer):
            s.kit.request_handled = kit_requests.handled_key(s, due.request_id)
        elif isinstance(due, kit_requests.PauseUntil):
            kit_requests.mark_wait(s, due.request.id)
    assert acted == ["DeliverAnswer", "PauseUntil"]
    # Runs begun before the marks were kept apart still take turns (their histories replay).
    s.kit.talk_marks_apart, s.kit.request_handled, s.kit.wait_handled = False, None, None
    first = kit_requests.request_due(s, NOW, 8)
    assert isinstance(first, kit_requests.DeliverAnswer)
    s.kit.request_handled = kit_requests.handled_key(s, first.request_id)
    second = kit_requests.request_due(s, NOW, 8)
    assert isinstance(second, kit_requests.PauseUntil)
    kit_requests.mark_wait(s, second.request.id)
    assert isinstance(kit_requests.request_due(s, NOW, 8), kit_requests.DeliverAnswer)


def test_runs_without_the_patch_ignore_requests() -> None:
    s = state(ask=ASK, usage={"stream": "a", "usd": 3})
    s.kit.agent_requests = False
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
    s.kit.waiting_since = NOW
    later = NOW + timedelta(hours=5)
    assert budget.hours_used(s, later) == 0
    s.kit.waited_seconds, s.kit.waiting_since = 5 * 3600, None
    assert budget.hours_used(s, later + timedelta(hours=1)) == 1


def test_the_card_and_the_status_show_the_question_the_wait_the_spend_and_the_results() -> None:
    from overnight.cli.render import status_text
    from workflows.pure.card import build_status, render_card

    s = state(
        usage={"stream": "a1-p1-0", "usd": 2.5, "input_tokens": 7},
        finish={"summary": "done", "outputs": {"pr": "https://example.test/pr/3"}},
    )
    s.kit.question = AskRequest(**ASK)
    s.kit.waiting_since = NOW
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
    assert (
        s.progress.checkpoint_facts is not None and s.progress.checkpoint_facts.requests is not None
    )
    s.kit.wait = s.progress.checkpoint_facts.requests.wait
    assert s.kit.wait is not None
    s.kit.waiting_until = s.kit.wait.until
    card = render_card(build_status(s, NOW), NOW)
    assert "- **paused until** 2026-12-01 03:30 UTC: x - \\*\\*result\\*\\* all tests pass" in card
    s.kit.wait = s.kit.waiting_until = None
    s.kit.question = AskRequest(id="q1", question="Go?", choices=["yes" + forged, "no"])
    card = render_card(build_status(s, NOW), NOW)
    assert forged not in card
    assert "(one of: yes - \\*\\*result\\*\\* all tests pass, no)" in card


def test_the_card_shows_agent_text_as_written_never_as_a_link_or_emphasis() -> None:
    """The card is Markdown in the operator's Web UI: an agent's `[Approve](https://...)`
    would be a link there, with the agent's words on it."""
    from workflows.pure.card import build_status, render_card

    phish = "[Approve the deploy](https://evil.example/login) **now**"
    s = state(finish={"summary": phish, "outputs": {"next_pr": "<https://evil.example>"}})
    s.progress.checkpoint_facts = facts_of(json.dumps({"step": 2, "next": f"{phish}\n# heading"}))
    card = render_card(build_status(s, NOW), NOW)
    shown = "\\[Approve the deploy\\](https://evil.example/login) \\*\\*now\\*\\*"
    assert f"- **result** {shown}" in card
    assert "- **output next\\_pr** \\<https://evil.example\\>" in card
    assert f"- **next step** {shown} # heading" in card
    # Every bracket and angle bracket in the card is escaped: no link, image or autolink.
    assert re.search(r"(?<!\\)[\[<]", card) is None


# ---- waits and their budget ------------------------------------------------------------------


def waiting(until: datetime, **fields: Any) -> SupervisorState:
    s = state(wait={"id": "w1-a", "until": until.isoformat(), "reason": "window"})
    return put(s, **fields)


def test_a_wait_is_clipped_to_the_room_left_however_little() -> None:
    due = kit_requests.request_due(waiting(NOW + timedelta(hours=5)), NOW, 0.5)
    assert isinstance(due, kit_requests.PauseUntil) and due.until == NOW + timedelta(hours=0.5)


def test_a_pause_of_exactly_the_least_pause_is_taken() -> None:
    due = kit_requests.request_due(waiting(NOW + kit_requests.LEAST_PAUSE), NOW, 8)
    assert isinstance(due, kit_requests.PauseUntil) and due.until == NOW + kit_requests.LEAST_PAUSE


def test_a_wait_with_its_budget_used_up_goes_to_a_person_with_the_request() -> None:
    s = waiting(NOW + timedelta(hours=5), wait_budget_kept=True)
    due = kit_requests.request_due(s, NOW, 0)
    assert (
        s.progress.checkpoint_facts is not None and s.progress.checkpoint_facts.requests is not None
    )
    assert due == kit_requests.WaitOverBudget(s.progress.checkpoint_facts.requests.wait)  # type: ignore[arg-type]
    # A wait of exactly the least pause is still one; a shorter one is slept through.
    assert isinstance(
        kit_requests.request_due(
            waiting(NOW + kit_requests.LEAST_PAUSE, wait_budget_kept=True), NOW, 0
        ),
        kit_requests.WaitOverBudget,
    )
    short = waiting(NOW + timedelta(seconds=29), wait_budget_kept=True)
    assert kit_requests.request_due(short, NOW, 0) is None


def test_a_run_begun_before_the_wait_budget_out_of_hours_lets_the_agent_sleep_the_wait() -> None:
    assert kit_requests.request_due(waiting(NOW + timedelta(hours=5)), NOW, 0) is None


def test_runs_begun_before_the_marks_were_apart_mark_a_wait_with_the_questions_mark() -> None:
    s = state()
    kit_requests.mark_wait(s, "w1-a")
    assert s.kit.request_handled == "box-1:w1-a" == kit_requests.wait_mark(s)
    assert s.kit.wait_handled is None
    s.kit.talk_marks_apart = True
    kit_requests.mark_wait(s, "w2-b")
    assert (s.kit.wait_handled, s.kit.request_handled) == ("box-1:w2-b", "box-1:w1-a")
    assert kit_requests.wait_mark(s) == "box-1:w2-b"


def test_a_wait_cut_short_by_its_budget_is_acted_on_again_once_unmarked() -> None:
    s = waiting(NOW + timedelta(hours=5), talk_marks_apart=True)
    kit_requests.mark_wait(s, "w1-a")
    assert kit_requests.request_due(s, NOW, 8) is None
    kit_requests.unmark_wait(s)
    assert s.kit.wait_handled is None
    assert isinstance(kit_requests.request_due(s, NOW, 8), kit_requests.PauseUntil)


def test_a_pause_that_just_began_has_taken_no_time() -> None:
    s = state()
    s.kit.waited_seconds, s.kit.waiting_since = 60.0, NOW
    assert kit_requests.waited_seconds(s, NOW) == 60.0
    assert kit_requests.waited_seconds(s, NOW - timedelta(seconds=5)) == 60.0  # never less


# ---- the requests file and the checkpoint ----------------------------------------------------


def test_a_run_reading_the_requests_file_hears_the_checkpoints_requests_too() -> None:
    s = state(ask=ASK)
    s.kit.requests_file = True
    asked = kit_requests.requests_now(s)
    assert asked is not None and asked.ask == AskRequest(**ASK)
    s.kit.file_requests = AgentRequests(usage=ModelUsage(stream="f", usd=1))
    asked = kit_requests.requests_now(s)
    assert asked is not None and asked.ask == AskRequest(**ASK) and asked.usage is not None


def test_a_run_reading_the_requests_file_counts_the_spend_of_both() -> None:
    s = state()
    s.kit.requests_file = True
    s.kit.file_requests = AgentRequests(usage=ModelUsage(stream="file", usd=2))
    taken(s, usage={"stream": "checkpoint", "usd": 3}, finish={"summary": "done"})
    assert kit_requests.model_usd(s) == 5 and s.kit.outputs is not None


def test_runs_without_the_patch_take_no_spend_or_results_from_the_checkpoint() -> None:
    s = state()
    s.kit.agent_requests = False
    taken(s, usage={"stream": "a", "usd": 3}, finish={"summary": "done"})
    assert (kit_requests.model_usd(s), s.kit.outputs) == (0, None)


def test_a_refused_request_is_said_and_a_good_one_clears_it() -> None:
    s = state(ask={"id": "bad id!", "question": "Go?"})
    assert s.kit.request_refused is not None and "id" in s.kit.request_refused
    taken(s, ask=ASK)
    assert s.kit.request_refused is None


# ---- model spend, answers, what the status shows ---------------------------------------------


def test_spend_of_more_streams_than_kept_folds_the_oldest_into_one_sum() -> None:
    s = state()
    for n in range(kit_requests.MAX_STREAMS):
        taken(s, usage={"stream": f"s{n}", "usd": 1})
    assert len(s.money.model_usage) == kit_requests.MAX_STREAMS and s.money.model_usd_folded == 0
    taken(s, usage={"stream": "one-more", "usd": 2})
    taken(s, usage={"stream": "and-another", "usd": 3})
    assert len(s.money.model_usage) == kit_requests.MAX_STREAMS
    assert (
        "s0" not in s.money.model_usage
        and "s1" not in s.money.model_usage
        and "s2" in s.money.model_usage
    )
    assert s.money.model_usd_folded == 2
    assert kit_requests.model_usd(s) == kit_requests.MAX_STREAMS + 5  # nothing lost


def test_an_answer_is_kept_by_its_questions_id_the_latest_hundred() -> None:
    s = state()
    for n in range(kit_requests.MAX_ANSWERS + 1):
        s.kit.question = AskRequest(id=f"q{n}", question="Go?")
        kit_requests.record_answer(s, f"answer {n}")
    last = kit_requests.MAX_ANSWERS
    assert s.kit.answer_given == f"answer {last}" and s.kit.answers[f"q{last}"] == f"answer {last}"
    assert (
        len(s.kit.answers) == kit_requests.MAX_ANSWERS
        and "q0" not in s.kit.answers
        and "q1" in s.kit.answers
    )


def test_the_status_shows_the_question_until_it_is_answered_and_the_wait_while_it_lasts() -> None:
    s = state(usage={"stream": "a", "usd": 1, "input_tokens": 7, "output_tokens": 9})
    s.kit.question, s.kit.waiting_since, s.kit.request_refused = (
        AskRequest(**ASK),
        NOW,
        "a wait out of shape",
    )
    talk = kit_requests.talk_view(s)
    assert talk is not None
    assert (talk.question, talk.choices, talk.asked_at) == ("Go?", ["yes", "no"], NOW)
    assert (talk.model_input_tokens, talk.model_output_tokens) == (7, 9)
    assert talk.refused == "a wait out of shape"
    s.kit.answer_given = "yes"
    talk = kit_requests.talk_view(s)
    assert talk is not None and (talk.question, talk.choices, talk.asked_at) == (None, [], None)
    s.kit.waiting_until = NOW + timedelta(hours=1)  # left from a wait that is over
    talk = kit_requests.talk_view(s)
    assert talk is not None and (talk.waiting_until, talk.waiting_reason) == (None, None)


def test_a_question_is_told_with_the_answers_it_allows() -> None:
    assert kit_requests.question_text(AskRequest(**ASK)) == "Go? (answer one of: yes, no)"
    assert kit_requests.question_text(AskRequest(id="q2", question="Why?")) == "Why?"
