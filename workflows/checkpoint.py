"""Which checkpoint versions may replace the last good one. Pure functions, no I/O."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from activities.models import CheckpointRead
from overnight.models import CheckpointSummary

# Longest `next` / note text carried into the status and the Web UI card.
SUMMARY_CHARS = 200


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    is_json: bool = False
    reason: str | None = None


def judge(read: CheckpointRead, *, previous_was_json: bool, max_bytes: int) -> Verdict:
    """Accept a newly read checkpoint, or say why the last good one stays."""
    if read.status == "too_large":
        return Verdict(False, reason=f"checkpoint is {read.size} bytes, over the {max_bytes} cap")
    if read.status == "unreadable" and read.digest is None:
        return Verdict(False, reason=None)  # not read at all (sandbox not running): no verdict
    if read.status == "unreadable":
        return Verdict(
            False, reason=f"checkpoint could not be read: {read.detail or 'not UTF-8 text'}"
        )
    if read.status == "outside":
        return Verdict(False, reason="checkpoint path leads outside the sandbox")
    if read.status != "ok" or read.text is None:
        return Verdict(False, reason=None)
    if len(read.text.encode()) > max_bytes:
        return Verdict(False, reason=f"checkpoint is over the {max_bytes}-byte cap")
    is_json = _parses_as_json(read.text)
    if previous_was_json and not is_json:
        return Verdict(False, reason="checkpoint stopped parsing as JSON (truncated or corrupt)")
    return Verdict(True, is_json=is_json)


def summarize(text: str | None) -> CheckpointSummary | None:
    """The checkpoint's `next` and its last note, when it is such JSON."""
    if not text:
        return None
    try:
        data: Any = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    next_step = data.get("next")
    notes = data.get("notes")
    last_note = notes[-1] if isinstance(notes, list) and notes else None
    return CheckpointSummary(
        next=_clip(next_step) if next_step is not None else None,
        last_note=_clip(last_note) if last_note is not None else None,
    )


def _clip(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def _parses_as_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
