"""A run's row: what the console's runs list and its night show of a run without asking it.

A run begun with `ROW_PATCH` keeps this in its memo under `ROW_MEMO_KEY`
(workflows/visibility.py writes it), so one visibility list of a page of runs carries every
row: no `status` query per run. The memo is a payload, so the codec encrypts it like the rest;
the console decodes it through the client's data converter.

Read leniently (unknown keys ignored, every field defaulted): a memo written by an older or a
newer overnight still gives what it has. Text fields are clipped here, where they are made, so
a row stays small whatever the agent wrote (a page of 1,000 rows is a few hundred KiB).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# A memo is rewritten whole, so every byte of it is paid at each write.
MAX_TEXT = 240
MAX_CHOICES = 8
MAX_CHOICE_TEXT = 60


class RowMemo(BaseModel):
    """The row's figures. Budgets beside what was used; None: not known (or no budget)."""

    model_config = ConfigDict(extra="ignore")

    state: str = ""
    attempt: int = 0
    restarts: int = 0
    max_restarts: int | None = None
    next_step: str | None = None
    spend_usd: float = 0
    max_spend_usd: float | None = None
    model_usd: float = 0
    hours_used: float = 0
    max_hours: float | None = None
    # Time held for people: paused for the agent's questions and waits (`wait_hours`), and
    # out of budget waiting for an extension or a cancel (`attention_hours`).
    wait_hours: float = 0
    attention_hours: float = 0
    last_progress_at: datetime | None = None
    pull_request_url: str | None = None
    attention: str | None = None
    question: str | None = None
    choices: list[str] = Field(default_factory=list)
    # What the safety net cost (None: a run that does not count it) and restarts by cause.
    safety_net_usd: float | None = None
    restarts_by_cause: dict[str, int] = Field(default_factory=dict)
    # The failure's one line, when the run failed at once on what no retry fixes.
    failure: str | None = None


def clip(text: str | None, most: int = MAX_TEXT) -> str | None:
    """One line of at most `most` characters (None stays None, blank becomes None)."""
    if text is None:
        return None
    line = " ".join(text.split())
    if not line:
        return None
    return line if len(line) <= most else line[: most - 1] + "…"


def row_from_memo(value: Any) -> RowMemo | None:
    """The memo's row as decoded (a JSON object); None when there is none or it is unreadable."""
    if not isinstance(value, dict):
        return None
    try:
        return RowMemo.model_validate(value)
    except ValidationError:
        return None
