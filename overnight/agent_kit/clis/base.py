"""What every coding-agent CLI shares: the events its output lines mean, the outcomes a
process ends with, the helpers a kind's parser uses, and `Cli`, the base a kind overrides.

Standard library only, Python 3.8 or newer, like the kit.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from .spend import Spend


class Event:
    """Something a CLI's output line says."""


class SessionStarted(Event):
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id


class ToolStarted(Event):
    """A tool call: `key` is the same for the same call with the same input (loops), `label`
    a short human name ("Bash `pytest -q`")."""

    def __init__(self, call_id: str, name: str, key: str, label: str) -> None:
        self.call_id = call_id
        self.name = name
        self.key = key
        self.label = label


class ToolFinished(Event):
    def __init__(self, call_id: str, is_error: bool) -> None:
        self.call_id = call_id
        self.is_error = is_error


class AssistantText(Event):
    def __init__(self, text: str) -> None:
        self.text = text


class ModelMessage(Event):
    """A model answer this process received (Claude: its id, for the spend of a killed one)."""

    def __init__(self, message_id: str, model: str, usage: dict[str, Any]) -> None:
        self.message_id = message_id
        self.model = model
        self.usage = usage


class LimitHit(Event):
    """A usage limit reported as it happened (before the result says the run failed)."""

    def __init__(self, resets_at: float | None, window: str) -> None:
        self.resets_at = resets_at
        self.window = window


class Retrying(Event):
    """The CLI retries a model call itself."""

    def __init__(self, status: str, attempt: int, most: int) -> None:
        self.status = status
        self.attempt = attempt
        self.most = most


class TokenTotals(Event):
    """The session's token counts so far (Codex: its thread's)."""

    def __init__(self, totals: dict[str, int]) -> None:
        self.totals = totals


# The outcomes a CLI process ends with (`Finished.outcome`).
SUCCESS = "success"
MAX_TURNS = "max_turns"
CONTEXT_FULL = "context_full"
USAGE_LIMIT = "usage_limit"
API_ERROR = "api_error"
SESSION_MISSING = "session_missing"
ERROR = "error"


class Finished(Event):
    """The CLI's last word on this process: `outcome` (above), its text, and what it knows of
    a limit's end (`resets_at`) or an API error's status."""

    def __init__(
        self,
        outcome: str,
        text: str,
        resets_at: float | None = None,
        status: int | None = None,
        cost_usd: float | None = None,
        total_cost_usd: float | None = None,
        model_usage: dict[str, Any] | None = None,
    ) -> None:
        self.outcome = outcome
        self.text = text
        self.resets_at = resets_at
        self.status = status
        self.cost_usd = cost_usd
        self.total_cost_usd = total_cost_usd
        self.model_usage = model_usage or {}


# --- helpers of every kind ------------------------------------------------------------------------

RETRYABLE_STATUSES = {408, 409, 425, 429, 500, 502, 503, 504, 529}
CONTEXT_WORDS = (
    "prompt is too long",
    "context window",
    "context_length_exceeded",
    "context length",
    "maximum context",
    "too many tokens",
)


def call_key(name: str, value: Any) -> str:
    """A digest naming a tool call with its input (the same call, the same key)."""
    text = json.dumps([name, value], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:24]


def clip(text: str, most: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= most else text[: most - 1] + "\u2026"


def mangled(path: str) -> str:
    """Claude Code's folder name for a working directory: each non-alphanumeric character a -."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)


_CLOCK = re.compile(r"(\d{1,2})(?::(\d{2}))?\s*([ap]\.?m\.?)?", re.IGNORECASE)


def next_clock_time(text: str, now: float, utc: bool) -> float | None:
    """The next moment after `now` at the clock time `text` names ("9:06am", "21:30", "9 PM"),
    in UTC (`utc`) or the local zone; None when it names none."""
    match = _CLOCK.search(text)
    if match is None or (match.group(2) is None and match.group(3) is None):
        return None
    hour, minute = int(match.group(1)), int(match.group(2) or 0)
    meridiem = (match.group(3) or "").lower().replace(".", "")
    if meridiem == "pm" and hour < 12:
        hour += 12
    if meridiem == "am" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59:
        return None
    zone = _dt.timezone.utc if utc else None  # noqa: UP017 (Python 3.8)
    base = _dt.datetime.fromtimestamp(now, zone)
    moment = base.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if moment.timestamp() <= now:
        moment += _dt.timedelta(days=1)
    return moment.timestamp()


def label(name: str, value: Any) -> str:
    """A tool call as a person reads it: Bash `pytest -q`, Write notes.txt, Read app.py."""
    if not isinstance(value, dict):
        return name
    for key in ("command", "cmd"):
        if isinstance(value.get(key), str):
            return f"{name} `{clip(value[key], 60)}`"
    for key in ("file_path", "path", "notebook_path", "pattern", "url", "query", "question"):
        if isinstance(value.get(key), str):
            return f"{name} {clip(value[key], 60)}"
    return name


def as_int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def as_float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


class Cli:
    """What the adapter asks of a coding-agent CLI: how it is set up, started and resumed,
    what its JSON lines mean (`parse`), where its session is, and how its spend is counted.
    A kind overrides what it has; the defaults are a CLI with none of it."""

    kind = ""
    # The session-file lines `session_lines` is given (spend, limits): the rest is not parsed.
    session_needles: tuple[bytes, ...] = ()
    # True: the CLI takes a new session's id from the adapter (`new_session_id`), so a session
    # it starts under another id is worth a note.
    takes_session_ids = False
    # True: the CLI has no turn limit of its own; the adapter ends its process after
    # `max_turns` completed tool calls.
    counts_turns = False
    # How this kind's spend is counted.
    spend_class: type[Spend] = Spend

    def __init__(self, cli: str, cwd: str, env: dict[str, str]) -> None:
        self.cli = cli
        self.cwd = cwd
        self.env = env
        self.session_home = ""  # the folder its session files are under
        self.spend = self.spend_class("", {}, "")  # not kept until `count_spend`
        # A usage limit's end, exact, as this process's session file says it (Codex).
        self.resets_at: float | None = None

    def count_spend(self, path: str, prices: dict[str, Any], model: str) -> Spend:
        """This adapter's spend, kept at `path` and priced by the spec's table."""
        self.spend = self.spend_class(path, prices, model)
        return self.spend

    def settings(self, base_url: str, mcp_command: list[str], state_dir: str) -> None:
        raise NotImplementedError

    def new_session(self, session_id: str, model: str, max_turns: int) -> list[str]:
        raise NotImplementedError

    def resume(self, session_id: str, model: str, max_turns: int) -> list[str]:
        raise NotImplementedError

    def new_session_id(self) -> str | None:
        """The id of a new session when the CLI takes one (`takes_session_ids`), else None."""
        return None

    def session_file(self, session_id: str) -> str:
        raise NotImplementedError

    def store_match(self, session_id: str) -> Callable[[str], bool]:
        raise NotImplementedError

    def restored_path(self, relative: str) -> str:
        """Where a session file kept at `relative` (in the store) goes in this sandbox."""
        return relative

    def started(self) -> None:
        """A new process: forget what the last one said."""
        self.resets_at = None

    def process_starting(self, session: str, mode: str, path: str) -> None:
        """A process of `session` (its file at `path`, "" when it has none yet) starts in
        `mode` ("new" or "resume"): what its spend starts from."""

    def session_started(self, session: str) -> None:
        """The CLI named the session this process works in."""

    def counted(self, event: Event, session: str) -> None:
        """What an event of the output says of spend."""

    def session_lines(self, lines: Iterable[dict[str, Any]], session: str) -> None:
        """New lines of the session's file (those holding `session_needles`)."""

    def process_ended(
        self, returncode: int, stderr_tail: str, finished: Finished | None
    ) -> Finished | None:
        """The last word of a process that ended, from what its output said (`finished`, None
        when nothing) and what only its stderr or exit code say: a failure said nowhere else,
        a usage limit's end. None: a crash."""
        return finished

    def parse(self, line: dict[str, Any]) -> list[Event]:
        raise NotImplementedError
