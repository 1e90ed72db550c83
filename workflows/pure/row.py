"""A run's row for the console (overnight/core/run_row.py), made from its status, and when it is
worth writing again. Pure.

Each write of the memo is a history event and a write to the server's visibility store, so
the row follows the lean-writes rule of workflows/visibility.py: what a person acts on (the
state, the attempt, a question, why it needs attention, a budget extended, the pull request)
is written as it changes; what only grows with time or with each checkpoint (spend, hours,
the next step, last progress) rides along with such a change, or alone once the row written
last is `REFRESH_EVERY` old (a first figure, like the first checkpoint's next step, at
once). A run checkpointing every minute so writes its row at most 6
times an hour besides its changes of state.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from overnight.core.models import RunStatus
from overnight.core.run_row import MAX_CHOICE_TEXT, MAX_CHOICES, RowMemo, clip

REFRESH_EVERY = timedelta(minutes=10)
# What only grows with time or checkpoints: written with a change of the rest, or when due.
GROWING = frozenset(
    {
        "next_step",
        "spend_usd",
        "model_usd",
        "hours_used",
        "wait_hours",
        "attention_hours",
        "last_progress_at",
        "safety_net_usd",
    }
)


def row_of(status: RunStatus, now: datetime) -> RowMemo:
    """The row of this status at `now` (the figures rounded: a row is for reading)."""
    summary = status.checkpoint_summary
    talk = status.talk
    elapsed = max(0.0, (now - status.started_at).total_seconds() / 3600)
    waiting = status.state == "waiting_for_answer" and talk is not None
    return RowMemo(
        state=status.state,
        attempt=status.attempt,
        restarts=status.restarts_used,
        max_restarts=status.budget.max_restarts,
        next_step=clip(summary.next if summary else None),
        spend_usd=round(status.spend_usd, 4),
        max_spend_usd=status.budget.max_spend_usd,
        model_usd=round(status.spend_model_usd, 4),
        hours_used=round(status.hours_used, 3),
        max_hours=status.budget.max_hours,
        wait_hours=round(status.wait_hours_used, 3),
        attention_hours=round(max(0.0, elapsed - status.hours_used - status.wait_hours_used), 3),
        last_progress_at=status.last_progress_at,
        pull_request_url=status.pull_request_url,
        attention=clip(status.attention_reason),
        question=clip(talk.question) if waiting and talk is not None else None,
        choices=[
            clip(choice, MAX_CHOICE_TEXT) or ""
            for choice in (talk.choices if waiting and talk is not None else [])[:MAX_CHOICES]
        ],
        safety_net_usd=None if status.safety_net is None else round(status.safety_net.usd, 4),
        restarts_by_cause=dict(status.safety_net.by_cause) if status.safety_net else {},
        failure=clip(status.failure),
    )


def row_due(shown: RowMemo | None, row: RowMemo, shown_at: datetime | None, now: datetime) -> bool:
    """Whether `row` is written now, `shown` being the row written last, at `shown_at`."""
    if shown is None or shown_at is None:
        return True
    if row == shown:
        return False
    fresh, last = row.model_dump(), shown.model_dump()
    changed = {name for name, value in fresh.items() if last.get(name) != value}
    if changed - GROWING:
        return True
    if any(last.get(name) is None for name in changed):
        return True  # a first figure (the first checkpoint's next step): shown at once
    return now - shown_at >= REFRESH_EVERY
