"""A create's failed try, told to its run so the Web UI card can say what the run waits on.

An activity's retries are the server's: the workflow sees none of them until the last fails.
So the create activity, as a try fails and another will follow, signals its run a `RetryNote`
(best effort), and the card shows it in one line until the create ends:
`create sandbox, try 9 of 16, next at 14:05:10 UTC: cloning URL: connection refused`.
`overnight status` and `list` read the same from the server's pending activities.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict

RETRY_NOTE_SIGNAL = "activity_retrying"
MESSAGE_CHARS = 300


class RetryNote(BaseModel):
    model_config = ConfigDict(extra="ignore")

    activity: str  # "create sandbox"
    sandbox_attempt: int  # the run's attempt the create is for (a late note is ignored)
    next_try: int  # the try that follows, 2, 3, ...
    max_tries: int  # 0: no limit
    message: str  # the failed try's error, its first line
    next_at: datetime | None = None


def next_try_delay(
    tries_done: int,
    initial: timedelta,
    coefficient: float,
    maximum: timedelta | None,
) -> timedelta:
    """How long Temporal waits before the try after `tries_done` failed ones."""
    delay = initial * coefficient ** max(0, tries_done - 1)
    return min(delay, maximum) if maximum is not None else delay


def note_line(note: RetryNote) -> str:
    tries = f"try {note.next_try}" + (f" of {note.max_tries}" if note.max_tries else "")
    when = f", next at {note.next_at:%H:%M:%S} UTC" if note.next_at is not None else ""
    return f"{note.activity}, {tries}{when}: {note.message}"
