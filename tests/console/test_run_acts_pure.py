"""What the run page's acts read and say, pure: the extension a form asks for (or why not), a
budget that covers an extension, the few words a person's act is on the timeline, and the
history's pause, wake and done-check summaries read as marks."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from overnight.console.run_actions import NOTICES, Refused, covers, extension_of
from overnight.console.run_events import _activity_mark, said
from overnight.core.models import Budget, BudgetExtension

AT = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)


def test_the_form_asks_for_what_its_filled_fields_add() -> None:
    form = {"hours": "2.5", "spend_usd": "", "restarts": "1", "wait_hours": " ", "csrf": "x"}
    assert extension_of(form) == BudgetExtension(hours=2.5, restarts=1)


@pytest.mark.parametrize(
    ("form", "why"),
    [
        ({}, "the extension adds nothing"),
        ({"hours": "two"}, "hours: 'two' is not a number"),
        ({"restarts": "1.5"}, "restarts: '1.5' is not a number"),
        ({"spend_usd": "-3"}, "spend usd: Input should be greater than or equal to 0"),
        ({"hours": "nan"}, "hours:"),
    ],
)
def test_a_bad_extension_is_refused_saying_which_field(form: dict[str, str], why: str) -> None:
    with pytest.raises(Refused, match=why.replace("(", r"\(")):
        extension_of(form)


def test_a_budget_covers_an_extension_when_each_limit_is_at_least_as_large() -> None:
    extended = Budget(max_hours=26, max_restarts=6, max_spend_usd=5)
    assert covers(Budget(max_hours=26, max_restarts=7, max_spend_usd=5), extended)
    assert not covers(Budget(max_hours=24, max_restarts=6, max_spend_usd=5), extended)
    assert not covers(Budget(max_hours=26, max_restarts=6), extended)  # no spend limit yet
    assert covers(
        Budget(max_hours=26, max_restarts=6, max_spend_usd=1), Budget(max_hours=26, max_restarts=6)
    )


def test_a_persons_act_in_a_few_words() -> None:
    assert said("cancel", ["wrong branch"]) == "wrong branch"
    assert said("cancel", [None]) == ""
    assert said("answer", ["ship it"]) == "ship it"
    assert said("rewind", [2]) == "to checkpoint 2"
    assert said("extend", [{"hours": 2, "spend_usd": 0, "restarts": 1}]) == "+2 h, +1 restarts"


def test_the_historys_summaries_read_as_marks() -> None:
    pause = _activity_mark(
        AT, "pause_sandbox", "pause sandbox r1-2 (question q1-ab waits for a person)"
    )
    assert pause is not None and (pause.kind, pause.detail) == (
        "pause",
        "question q1-ab waits for a person",
    )
    wake = _activity_mark(AT, "wake_sandbox", "wake sandbox r1-2 (lease ended, agent progressing)")
    assert wake is not None and (wake.kind, wake.detail) == (
        "wake",
        "lease ended, agent progressing",
    )
    check = _activity_mark(AT, "run_done_check", "done check 1 in place: pytest -q")
    assert check is not None and check.kind == "done_check"
    assert _activity_mark(AT, "pause_sandbox", "something else") is None


def test_every_notice_key_an_action_sends_back_has_its_sentence() -> None:
    sent = {"answer-taken", "answer-sent", "extend-taken", "extend-woke", "extend-held"}
    sent |= {"cancel-taken", "cancel-sent", "rewind-taken", "rewind-sent"}
    assert sent == set(NOTICES)
