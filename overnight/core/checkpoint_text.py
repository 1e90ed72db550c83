"""What an agent's checkpoint text says, read with limits. Pure, and it never raises.

A checkpoint is agent bytes: whatever it holds, reading it must not fail the code that reads
it. The activity that reads a checkpoint calls `facts_of` (its answer travels with the read,
so the workflow parses nothing); workflow code calls it too, for reads recorded before the
activity did (the same answer, never an exception).

The limits: JSON nested deeper than `MAX_DEPTH` is refused after a linear scan, before
`json.loads` could recurse into it (200 KB of `[` would raise `RecursionError`); any other
failure to parse means "not JSON"; text taken from it for the status is clipped and made
encodable (a `"\\ud800"` escape parses to a lone surrogate, which no payload can carry).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from itertools import accumulate
from typing import Any

from pydantic import BaseModel, ConfigDict

from overnight.core.agent_requests import AgentRequests, requests_of
from overnight.core.constants import SNAPSHOT_REQUEST_KEY
from overnight.core.models import CheckpointSummary

# A checkpoint's own word on its work: only a change of its value is progress (see
# `CheckpointFacts.progress_mark`; the coding-agent adapter writes one).
PROGRESS_KEY = "progress_mark"
# Deeper JSON is refused unparsed (the agent kit's checkpoints nest two or three levels).
MAX_DEPTH = 64
# Longest `next` / note text carried into the status and the Web UI card.
SUMMARY_CHARS = 200
# A checkpoint larger than this is not parsed into `RunResult.checkpoint_json` (the text stays):
# the result would carry it twice.
MAX_PARSED_BYTES = 65536
# A snapshot request is a count the agent kit adds one to; larger numbers are not one.
MAX_SNAPSHOT_REQUEST = 2**53

# A JSON string (unrolled, so it is matched in linear time); anything but a bracket.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class CheckpointFacts(BaseModel):
    """What a checkpoint's text says, as the supervisor uses it."""

    model_config = ConfigDict(extra="forbid")

    # It parses as JSON (within the limits).
    is_json: bool = False
    # Why it may not be taken at all (None: it may).
    refusal: str | None = None
    # Its `next` and last note, when it is such JSON.
    summary: CheckpointSummary | None = None
    # The agent's latest snapshot request in it (0: none).
    snapshot_request: int = 0
    # What the agent kit asks of the supervisor in it (overnight.core.agent_requests).
    requests: AgentRequests | None = None
    # The SHA-256 of its `progress_mark` value, when it has one (None: it has none): an agent
    # that writes one says its work with it, and a checkpoint whose mark is the same as the
    # last one's is no progress, however else it changed (notes, `next`).
    progress_mark: str | None = None


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON `text` nests deeper than `limit` (brackets inside strings not counted).

    Linear and without recursion; for text that is not JSON it may over-count, which only
    ever refuses what would not parse."""
    head = text.lstrip()
    if not head or head[0] not in "[{":
        return False  # a scalar or not JSON: json.loads does not recurse into it
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if brackets.count("[") + brackets.count("{") <= limit:
        return False
    return max(accumulate(map(_STEP.__getitem__, brackets))) > limit


def parse(text: str) -> tuple[bool, Any]:
    """(True, value) for JSON within the limits; (False, None) for anything else."""
    if too_deep(text):
        return False, None
    try:
        return True, json.loads(text)
    except Exception:  # ValueError, RecursionError, MemoryError on a pathological input
        return False, None


def facts_of(text: str | None) -> CheckpointFacts:
    """Everything the supervisor takes from a checkpoint's text. Never raises."""
    if not text:
        return CheckpointFacts()
    try:
        if too_deep(text):
            return CheckpointFacts(refusal=f"it nests deeper than {MAX_DEPTH} levels")
        try:
            value = json.loads(text)
        except Exception:  # ValueError, or MemoryError on a pathological input
            return CheckpointFacts()
        return CheckpointFacts(
            is_json=True,
            summary=_summary(value),
            snapshot_request=_snapshot_request(value),
            requests=requests_of(value),
            progress_mark=_progress_mark(value),
        )
    except Exception:  # defence in depth: agent text never fails the caller
        return CheckpointFacts()


def _progress_mark(value: Any) -> str | None:
    if not isinstance(value, dict) or PROGRESS_KEY not in value:
        return None
    canonical = json.dumps(value[PROGRESS_KEY], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def summary_of(text: str | None) -> CheckpointSummary | None:
    return facts_of(text).summary


def snapshot_request_of(text: str | None) -> int:
    if not text or SNAPSHOT_REQUEST_KEY not in text:
        return 0
    return facts_of(text).snapshot_request


def _summary(value: Any) -> CheckpointSummary | None:
    if not isinstance(value, dict):
        return None
    next_step = value.get("next")
    notes = value.get("notes")
    last_note = notes[-1] if isinstance(notes, list) and notes else None
    return CheckpointSummary(
        next=clip(next_step) if next_step is not None else None,
        last_note=clip(last_note) if last_note is not None else None,
    )


def _snapshot_request(value: Any) -> int:
    number = value.get(SNAPSHOT_REQUEST_KEY) if isinstance(value, dict) else None
    if isinstance(number, bool) or not isinstance(number, int):
        return 0
    if number > MAX_SNAPSHOT_REQUEST:
        return 0
    return max(0, number)


def clip(value: object) -> str:
    """`value` as at most `SUMMARY_CHARS` characters of encodable text."""
    text = value if isinstance(value, str) else json.dumps(value)
    if len(text) > SUMMARY_CHARS:
        text = text[: SUMMARY_CHARS - 1] + "…"
    return encodable(text)


def encodable(text: str) -> str:
    """`text` with lone surrogates (from JSON escapes) replaced, so it can be serialised."""
    return text.encode("utf-8", errors="replace").decode("utf-8")


def parsed_for_result(text: str | None, is_json: bool) -> Any:
    """The checkpoint's JSON value for `RunResult.checkpoint_json`, beside its text: None for
    text that is not JSON (within the limits) or larger than `MAX_PARSED_BYTES`. Strings are
    made encodable (a lone-surrogate escape parses to what no payload can carry). Never raises."""
    if not text or not is_json or len(text.encode("utf-8", errors="replace")) > MAX_PARSED_BYTES:
        return None
    try:
        ok, value = parse(text)
        return _encodable_value(value) if ok else None
    except Exception:  # defence in depth: agent text never fails the result
        return None


def _encodable_value(value: Any) -> Any:
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, list):
        return [_encodable_value(item) for item in value]
    if isinstance(value, dict):
        return {encodable(key): _encodable_value(item) for key, item in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None  # NaN and infinities (`1e999`) are not JSON
    return value
