"""A run's row for the console (workflows/pure/row.py): what it says, clipped, and when it is
written again (what a person acts on at once, what only grows every 10 minutes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from overnight.core.agent_requests import AgentTalk
from overnight.core.models import Budget, CheckpointSummary, RunStatus
from overnight.core.run_row import MAX_TEXT
from workflows.pure.row import REFRESH_EVERY, row_due, row_of

START = datetime(2026, 12, 6, 0, 0, tzinfo=UTC)


def status(**fields: object) -> RunStatus:
    values: dict[str, object] = {
        "run_id": "r",
        "state": "running",
        "attempt": 1,
        "budget": Budget(max_spend_usd=5),
        "started_at": START,
        **fields,
    }
    return RunStatus.model_validate(values)


def test_the_row_says_the_figures_against_their_budgets_and_clips_agent_text() -> None:
    now = START + timedelta(hours=3)
    row = row_of(
        status(
            state="waiting_for_answer",
            hours_used=1.5,
            wait_hours_used=0.5,
            spend_usd=1.23456,
            checkpoint_summary=CheckpointSummary(next="x" * 1000),
            talk=AgentTalk(question="Ship\nit?", choices=["yes", "no", "y" * 500]),
        ),
        now,
    )
    assert (row.spend_usd, row.max_spend_usd, row.max_hours) == (1.2346, 5, 24)
    assert row.attention_hours == 1.0  # 3 h since the start, 1.5 running, 0.5 asking
    assert row.question == "Ship it?"
    assert row.next_step is not None and len(row.next_step) == MAX_TEXT
    assert len(row.choices[2]) < 100


def test_what_a_person_acts_on_is_written_at_once_what_grows_every_ten_minutes() -> None:
    shown_at = START + timedelta(hours=1)
    shown = row_of(status(spend_usd=1, checkpoint_summary=CheckpointSummary(next="a")), shown_at)
    later = shown_at + timedelta(minutes=3)
    grown = row_of(status(spend_usd=2, checkpoint_summary=CheckpointSummary(next="b")), later)
    asks = row_of(status(state="waiting_for_answer", talk=AgentTalk(question="?")), later)
    extended = row_of(status(spend_usd=1, budget=Budget(max_spend_usd=9)), later)

    assert row_due(None, shown, None, shown_at)
    assert not row_due(shown, shown, shown_at, later)
    assert not row_due(shown, grown, shown_at, later)
    assert row_due(shown, grown, shown_at, shown_at + REFRESH_EVERY)
    assert row_due(shown, asks, shown_at, later)
    assert row_due(shown, extended, shown_at, later)


def test_a_first_figure_is_written_at_once() -> None:
    shown = row_of(status(), START)
    first = row_of(status(checkpoint_summary=CheckpointSummary(next="read")), START)
    assert shown.next_step is None
    assert row_due(shown, first, START, START + timedelta(seconds=1))
