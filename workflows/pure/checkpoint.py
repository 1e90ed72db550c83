"""Which checkpoint versions may replace the last good one. Pure functions, no I/O.

The checkpoint is agent bytes: nothing here parses it in a way that could raise. The read
activity sends what the text says (`CheckpointRead.facts`, see overnight.core.checkpoint_text);
reads recorded before it did are read here with the same bounded parser.
"""

from __future__ import annotations

from dataclasses import dataclass

from activities.models import CheckpointRead
from overnight.core.checkpoint_text import SUMMARY_CHARS, CheckpointFacts, facts_of, summary_of
from overnight.core.models import CheckpointSummary

__all__ = ["SUMMARY_CHARS", "Verdict", "facts", "judge", "kept_facts", "summarize"]


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    is_json: bool = False
    reason: str | None = None


def facts(read: CheckpointRead) -> CheckpointFacts:
    """What a read checkpoint says: the activity's answer, else the text read here."""
    if read.facts is not None:
        return read.facts
    return facts_of(read.text)


def kept_facts(checkpoint: str | None, known: CheckpointFacts | None) -> CheckpointFacts:
    """What the kept checkpoint says: as taken with it, else (a run from before the facts were
    kept, or carried over from one) its text read here."""
    return known if known is not None else facts_of(checkpoint)


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
    said = facts(read)
    if said.refusal is not None:
        return Verdict(False, reason=f"checkpoint could not be read: {said.refusal}")
    if previous_was_json and not said.is_json:
        return Verdict(False, reason="checkpoint stopped parsing as JSON (truncated or corrupt)")
    return Verdict(True, is_json=said.is_json)


def summarize(text: str | None) -> CheckpointSummary | None:
    """The checkpoint's `next` and its last note, when it is such JSON (never raises)."""
    return summary_of(text)
