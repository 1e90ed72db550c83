"""What an agent asks of its supervisor, read with limits. Pure.

The kit's `ask`, `wait_until`, `report_usage` and `finish` write their requests into a file of
their own beside the checkpoint (`requests_path`: `.overnight-requests.json` in the
checkpoint's folder), written whole (temp file, rename), which overnight watches with the
checkpoint: an agent that saves its checkpoint its own way (`json.dump` and a rename) cannot
drop them. Agents written to the first protocol put the same object under one key of the
checkpoint (`overnight`), which is still read; where both say something, the file wins.
Answers come back as files under `ANSWERS_DIR`, one per request id, written whole. See
docs/writing-an-agent.md.

Agent bytes: `requests_of` and `requests_in` never raise; a request out of shape or over a
limit is dropped and said (`refused`), and what is kept is clipped to the limits below.
"""

from __future__ import annotations

import json
import math
import posixpath
import re
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# The checkpoint key agents of the first protocol write their requests under.
REQUESTS_KEY = "overnight"
# The kit's requests file, beside the checkpoint (the watch on its folder sees it written), and
# the most of it that is read: the kit clips what it writes to the limits below, well under it.
REQUESTS_FILE = ".overnight-requests.json"
MAX_REQUESTS_BYTES = 512 * 1024
# Where answers are written: `{ANSWERS_DIR}/{request id}.json`.
ANSWERS_DIR = "/workspace/.overnight/answers"
# A request id: the kit's is the checkpoint step and a digest of the question.
REQUEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_QUESTION_CHARS = 4000
MAX_CHOICES = 20
MAX_CHOICE_CHARS = 200
MAX_ANSWER_CHARS = 4000
MAX_REASON_CHARS = 500
MAX_SUMMARY_CHARS = 4000
MAX_OUTPUTS = 20
MAX_OUTPUT_NAME_CHARS = 64
MAX_OUTPUT_CHARS = 2000
MAX_MODEL_CHARS = 100
# More than any model bill a run could honestly report (a typo, or a hostile agent).
MAX_USAGE_USD = 1_000_000.0
MAX_TOKENS = 10**15
OUTPUT_NAME = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_OUTPUT_NAME_CHARS - 1}}}$")
# The labels of the card and `overnight status` (workflows/pure/card.py,
# overnight/core/status_lines.py, overnight/cli/render.py), and words that read as the run's own: an
# output may not be named one, in any case and with `-`, `_` or `.` for a space. Outputs are shown
# as `output <name>` besides, so no name takes a label's place; one that is a label would still read
# as overnight's (`output question`). tests/ground/test_output_names.py renders both to keep this
# whole.
RESERVED_OUTPUT_NAMES = frozenset(
    {
        "attempt", "budget left", "charged", "checkpoint kept", "hours", "kit request refused",
        "last note", "last output", "last progress", "last restart", "last words",
        "lease ends", "model spend", "needs attention", "needs you", "next", "next step",
        "output", "paused until", "question", "restarts", "result", "safety net", "sandbox",
        "snapshot", "spend", "state", "status", "step", "summary", "waits", "web ui",
    }
)  # fmt: skip
_NAME_SPACES = re.compile(r"[-_.]+")


def output_name_refusal(name: object) -> str | None:
    """Why an output may not have this name (None: it may). The agent kit's `finish()` says
    the same at once."""
    if not (isinstance(name, str) and OUTPUT_NAME.match(name)):
        return (
            f"an output's name must be 1 to {MAX_OUTPUT_NAME_CHARS} letters, digits, . _ - "
            "(those others are left out)"
        )
    if _NAME_SPACES.sub(" ", name).strip().lower() in RESERVED_OUTPUT_NAMES:
        return (
            f"an output may not be named {name!r}: the card and the status show it as their "
            "own label (it is left out)"
        )
    return None


class _Kept(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AskRequest(_Kept):
    """A question for a person; `choices`: the answers allowed (empty: any text)."""

    id: str
    question: str
    choices: list[str] = Field(default_factory=list)


class WaitRequest(_Kept):
    """Pause me until `until` (a usage window resets then), for `reason`."""

    id: str
    until: datetime
    reason: str = ""


class ModelUsage(_Kept):
    """What the agent's model calls have cost, cumulative for one `stream` (an agent process:
    the kit names it by attempt and pid), so a report read twice is counted once."""

    stream: str
    usd: float = 0
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""


class RunOutputs(_Kept):
    """What the agent handed over with the kit's `finish()`: a summary and named values."""

    summary: str = ""
    values: dict[str, str] = Field(default_factory=dict)


class AgentTalk(_Kept):
    """What the agent asks or waits for now, and what its model calls cost (the status)."""

    question: str | None = None
    choices: list[str] = Field(default_factory=list)
    asked_at: datetime | None = None
    waiting_until: datetime | None = None
    waiting_reason: str | None = None
    model_input_tokens: int = 0
    model_output_tokens: int = 0
    # Why the last request was refused (out of shape, over a limit).
    refused: str | None = None


class AgentRequests(_Kept):
    ask: AskRequest | None = None
    wait: WaitRequest | None = None
    usage: ModelUsage | None = None
    finish: RunOutputs | None = None
    # Why a request was dropped (the first reason), for the status and the log.
    refused: str | None = None


def requests_path(checkpoint_path: str) -> str:
    """Where the kit writes its requests: `REQUESTS_FILE` in the checkpoint's folder."""
    return posixpath.join(posixpath.dirname(checkpoint_path), REQUESTS_FILE)


def requests_of(checkpoint: Any) -> AgentRequests | None:
    """The requests in a parsed checkpoint (None: it has none). Never raises."""
    if not isinstance(checkpoint, dict):
        return None
    raw = checkpoint.get(REQUESTS_KEY)
    if raw is None:
        return None
    return requests_in(raw, f"`{REQUESTS_KEY}`")


def requests_in(raw: Any, where: str = "the requests file") -> AgentRequests:
    """The requests in a parsed requests object (the requests file's, or a checkpoint's
    `overnight` key: `where` names it in a refusal). Never raises."""
    try:
        return _read(raw, where)
    except Exception:  # defence in depth: agent JSON never fails the caller
        return AgentRequests(refused="the kit's requests could not be read")


def merged(file: AgentRequests | None, checkpoint: AgentRequests | None) -> AgentRequests | None:
    """What the agent asks now, from its requests file and its checkpoint's `overnight` key
    (agents of the first protocol): each kind of request from the file when it has one, else
    from the checkpoint. Model spend from both is in `usages`."""
    if file is None or checkpoint is None:
        return file if checkpoint is None else checkpoint
    return AgentRequests(
        ask=file.ask if file.ask is not None else checkpoint.ask,
        wait=file.wait if file.wait is not None else checkpoint.wait,
        usage=file.usage if file.usage is not None else checkpoint.usage,
        finish=file.finish if file.finish is not None else checkpoint.finish,
        refused=file.refused if file.refused is not None else checkpoint.refused,
    )


def usages(file: AgentRequests | None, checkpoint: AgentRequests | None) -> list[ModelUsage]:
    """The model spend both sources report: each stream once, the file's report where both
    name the same stream (each is cumulative within its stream, so none is lost)."""
    found = [r.usage for r in (file, checkpoint) if r is not None and r.usage is not None]
    if len(found) == 2 and found[0].stream == found[1].stream:
        return found[:1]
    return found


def _read(raw: Any, where: str) -> AgentRequests:
    if not isinstance(raw, dict):
        return AgentRequests(refused=f"{where} is not an object")
    refused: list[str] = []
    found = AgentRequests(
        ask=_ask(raw.get("ask"), refused),
        wait=_wait(raw.get("wait"), refused),
        usage=_usage(raw.get("usage"), refused),
        finish=_finish(raw.get("finish"), refused),
    )
    if refused:
        found.refused = refused[0]
    return found


def _ask(raw: Any, refused: list[str]) -> AskRequest | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not _is_id(raw.get("id")):
        refused.append("ask: needs an `id` of letters, digits, . _ - (at most 64)")
        return None
    question = raw.get("question")
    if not isinstance(question, str) or not question.strip():
        refused.append("ask: `question` must be non-empty text")
        return None
    if len(question) > MAX_QUESTION_CHARS:
        refused.append(f"ask: `question` is over {MAX_QUESTION_CHARS} characters")
        return None
    choices = raw.get("choices") or []
    if not isinstance(choices, list) or len(choices) > MAX_CHOICES:
        refused.append(f"ask: `choices` must be a list of at most {MAX_CHOICES} texts")
        return None
    if not all(isinstance(c, str) and 0 < len(c) <= MAX_CHOICE_CHARS for c in choices):
        refused.append(f"ask: each choice must be text of 1 to {MAX_CHOICE_CHARS} characters")
        return None
    return AskRequest(id=raw["id"], question=_clean(question), choices=[_clean(c) for c in choices])


def _wait(raw: Any, refused: list[str]) -> WaitRequest | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not _is_id(raw.get("id")):
        refused.append("wait_until: needs an `id` of letters, digits, . _ - (at most 64)")
        return None
    until = parse_when(raw.get("until"))
    if until is None:
        refused.append("wait_until: `until` must be an ISO 8601 time or epoch seconds")
        return None
    reason = raw.get("reason", "")
    reason = _clean(reason[:MAX_REASON_CHARS]) if isinstance(reason, str) else ""
    return WaitRequest(id=raw["id"], until=until, reason=reason)


def _usage(raw: Any, refused: list[str]) -> ModelUsage | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        refused.append("usage: not an object")
        return None
    stream = raw.get("stream")
    usd = _number(raw.get("usd", 0), MAX_USAGE_USD)
    tokens_in = _number(raw.get("input_tokens", 0), MAX_TOKENS)
    tokens_out = _number(raw.get("output_tokens", 0), MAX_TOKENS)
    if not _is_id(stream) or usd is None or tokens_in is None or tokens_out is None:
        refused.append(
            f"usage: needs a `stream` id and numbers from 0 (usd at most {MAX_USAGE_USD:g})"
        )
        return None
    model = raw.get("model", "")
    return ModelUsage(
        stream=stream,
        usd=usd,
        input_tokens=int(tokens_in),
        output_tokens=int(tokens_out),
        model=_clean(model[:MAX_MODEL_CHARS]) if isinstance(model, str) else "",
    )


def _finish(raw: Any, refused: list[str]) -> RunOutputs | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        refused.append("finish: not an object")
        return None
    summary = raw.get("summary", "")
    outputs = raw.get("outputs") or {}
    if not isinstance(summary, str) or not isinstance(outputs, dict):
        refused.append("finish: `summary` must be text and `outputs` an object")
        return None
    kept: dict[str, str] = {}
    for name, value in outputs.items():
        if len(kept) >= MAX_OUTPUTS:
            refused.append(f"finish: only the first {MAX_OUTPUTS} outputs are kept")
            break
        why = output_name_refusal(name)
        if why is not None:
            refused.append(f"finish: {why}")
            continue
        text = value if isinstance(value, str) else _json_text(value)
        kept[name] = _clip(text, MAX_OUTPUT_CHARS)
    return RunOutputs(summary=_clip(summary, MAX_SUMMARY_CHARS), values=kept)


def parse_when(value: Any) -> datetime | None:
    """A time as the kit writes it: ISO 8601 text (no zone: UTC) or epoch seconds; in UTC
    (None for one UTC cannot hold, such as year 1 at +14:00)."""
    try:
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            if not math.isfinite(value) or not 0 <= value < 2**37:
                return None
            return datetime.fromtimestamp(value, UTC)
        if isinstance(value, str) and len(value) <= 64:
            when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            return when.astimezone(UTC) if when.tzinfo is not None else when.replace(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return None


def choice_refusal(request: AskRequest, answer: str) -> str | None:
    """Why `answer` may not answer `request` (None: it may)."""
    if not answer.strip():
        return "the answer is empty"
    if len(answer) > MAX_ANSWER_CHARS:
        return f"the answer is over {MAX_ANSWER_CHARS} characters"
    if request.choices and answer not in request.choices:
        return "the answer must be one of: " + ", ".join(request.choices)
    return None


def answer_path(request_id: str) -> str:
    return f"{ANSWERS_DIR}/{request_id}.json"


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and REQUEST_ID.match(value) is not None


def _number(value: Any, most: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int) and not 0 <= value <= most:
        return None  # also one too large for a float (`10**400`, which JSON can spell)
    number = float(value)
    return number if math.isfinite(number) and 0 <= number <= most else None


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value)[: MAX_OUTPUT_CHARS + 1]
    except (TypeError, ValueError):
        return ""


def _clip(text: str, most: int) -> str:
    if len(text) > most:
        text = text[: most - 1] + "…"
    return _clean(text)


def _clean(text: str) -> str:
    """Encodable text (a JSON escape can spell a lone surrogate, which no payload carries)."""
    return text.encode("utf-8", errors="replace").decode("utf-8")
