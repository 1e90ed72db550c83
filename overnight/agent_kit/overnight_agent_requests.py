"""The agent kit speaking to the supervisor: `ask` a person, `wait_until` a time,
`report_usage` of the model, `finish` with a summary and outputs.

A sibling of `overnight_agent`, which re-exports every public name here (agents import them
from `overnight_agent`); apart because the requests file, its answers and the supervisor's
limits are a protocol of their own. Standard library only, Python 3.8 or newer.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # imported as overnight.agent_kit.overnight_agent_requests
    from overnight.agent_kit.overnight_agent_env import attempt, checkpoint_path
    from overnight.agent_kit.overnight_agent_files import as_int, load_values, write_whole
else:  # as agents import the kit: its folder on PYTHONPATH
    from overnight_agent_env import attempt, checkpoint_path
    from overnight_agent_files import as_int, load_values, write_whole

# Speaking to the supervisor. Requests travel in a file of their own beside the checkpoint,
# REQUESTS_FILE (overnight watches the checkpoint's folder), written whole like the checkpoint,
# so however the agent saves its checkpoint they stay asked; answers come back as files
# `{ANSWERS_DIR}/{request id}.json` ({"id", "answer"}), written whole. While a question waits
# (or a `wait_until` runs) overnight pauses the sandbox: this process stops and later goes on
# where it was, so the loops below only ever see the answer already there. (Agents of the first
# protocol wrote the same object under the checkpoint's key REQUESTS_KEY; overnight reads both.)
REQUESTS_KEY = "overnight"
REQUESTS_FILE = ".overnight-requests.json"
ANSWERS_DIR = "/workspace/.overnight/answers"
# What this process has asked, as last written (None: nothing yet).
_requests: dict[str, Any] | None = None
# The supervisor's limits (overnight.core.agent_requests): it refuses a question over them, and
# clips the rest to them, as the kit does before writing.
MAX_QUESTION_CHARS = 4000
MAX_CHOICES = 20
MAX_CHOICE_CHARS = 200
MAX_REASON_CHARS = 500
MAX_SUMMARY_CHARS = 4000
MAX_OUTPUTS = 20
MAX_OUTPUT_CHARS = 2000
MAX_MODEL_CHARS = 100


def ask(question: str, choices: list[str] | None = None, poll: float = 0.5) -> str:
    """Ask a person, and wait for the answer (one of `choices` when given).

    overnight pauses the sandbox while the question waits (it costs nothing), tells the run's
    webhooks, and wakes it with the answer (`overnight answer RUN TEXT`, or the `answer`
    update). Its id is the checkpoint's step and a digest of the question, so an agent that
    restarts from this checkpoint and asks again gets the answer already given.
    """
    choices = [str(c) for c in (choices or [])]
    _check_question(question, choices)
    digest = _digest(question, *choices)
    request_id = f"q{_checkpoint_step()}-{digest}"
    answer = _answer(request_id)
    if answer is None:
        _set_request("ask", {"id": request_id, "question": question, "choices": choices})
        while answer is None:
            time.sleep(poll)
            answer = _answer(request_id)
    _set_request("ask", None)
    return str(answer.get("answer", ""))


def _check_question(question: str, choices: list[str]) -> None:
    """Raise ValueError for a question the supervisor would refuse: it would never reach a
    person, and `ask` would wait for its answer forever."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("ask: the question must be non-empty text")
    if len(question) > MAX_QUESTION_CHARS:
        raise ValueError(f"ask: the question is over {MAX_QUESTION_CHARS} characters")
    if len(choices) > MAX_CHOICES:
        raise ValueError(f"ask: at most {MAX_CHOICES} choices")
    if not all(0 < len(c) <= MAX_CHOICE_CHARS for c in choices):
        raise ValueError(f"ask: each choice must be 1 to {MAX_CHOICE_CHARS} characters")


def wait_until(when: Any, reason: str = "", poll: float = 0.5) -> bool:
    """Wait until `when` (a datetime, epoch seconds or ISO 8601 text; no zone means UTC): a
    model's usage window resets then. overnight pauses the sandbox meanwhile (not a restart,
    not a stall, not run time) and wakes it then, or sooner when the run's budget ends first.
    True when the time came; False when overnight woke the agent early."""
    until = _epoch(when)
    if until <= time.time():
        return True
    stamp = _dt.datetime.fromtimestamp(until, _dt.timezone.utc).isoformat()  # noqa: UP017 (Python 3.8)
    request_id = f"w{_checkpoint_step()}-{_digest(stamp, reason)}"
    _set_request("wait", {"id": request_id, "until": stamp, "reason": reason[:MAX_REASON_CHARS]})
    woken = None
    while time.time() < until and woken is None:
        time.sleep(max(0.0, min(poll, until - time.time())))
        woken = _answer(request_id)
    _set_request("wait", None)
    return time.time() >= until


def report_usage(
    usd: float, input_tokens: int = 0, output_tokens: int = 0, model: str = ""
) -> None:
    """What this process's model calls have cost so far (cumulative, not the last call's):
    counted in the run's spend budget beside the sandbox's charges."""
    stream = f"a{attempt()}-p{os.getpid()}-{_started_at}"
    usage = {
        "stream": stream,
        "usd": float(usd),
        "input_tokens": int(input_tokens),
        "output_tokens": int(output_tokens),
        "model": str(model)[:MAX_MODEL_CHARS],
    }
    _set_request("usage", usage)


# What the supervisor refuses of an output's name (overnight.core.agent_requests): one that is not
# 1-64 ASCII letters, digits, `_`, `.` and `-` (beginning with a letter or digit), or one of the
# labels its card and status show (in any case, with `-`, `_` or `.` for a space).
MAX_OUTPUT_NAME_CHARS = 64
RESERVED_OUTPUT_NAMES = frozenset(
    {
        "attempt", "budget left", "charged", "checkpoint kept", "hours", "kit request refused",
        "last note", "last output", "last progress", "last restart", "last words",
        "lease ends", "model spend", "needs attention", "needs you", "next", "next step",
        "output", "paused until", "question", "restarts", "result", "safety net", "sandbox",
        "snapshot", "spend", "state", "status", "step", "summary", "waits", "web ui",
    }
)  # fmt: skip


def _check_output_names(outputs: dict[str, Any]) -> None:
    """Raise ValueError for an output the supervisor would refuse: it would never reach the
    result, and the agent would learn it only from the run's status."""
    for key in outputs:
        name = str(key)  # as finish() writes it
        if not _is_output_name(name):
            raise ValueError(f"finish: the output name {name!r} is not 1-64 letters, digits, . _ -")
        spaced = name.replace("-", " ").replace("_", " ").replace(".", " ")
        if " ".join(spaced.split()).lower() in RESERVED_OUTPUT_NAMES:
            raise ValueError(
                f"finish: an output may not be named {name!r}: overnight's card and status "
                "show it as their own label"
            )


def _is_output_name(name: Any) -> bool:
    if not isinstance(name, str) or not 0 < len(name) <= MAX_OUTPUT_NAME_CHARS:
        return False
    if not (name[0].isascii() and name[0].isalnum()):
        return False
    return all(c.isascii() and (c.isalnum() or c in "_.-") for c in name)


def finish(summary: str, outputs: dict[str, Any] | None = None) -> None:
    """Hand over what the run produced: a summary and named values (a pull request URL, a
    branch). They appear in the run's result, status and finish notification. Then exit 0.
    A name out of shape, or one of the labels overnight's card and status show (`question`,
    `result`, `next step`: RESERVED_OUTPUT_NAMES), raises ValueError at once."""
    _check_output_names(outputs or {})
    values = {
        str(k): _clip(v if isinstance(v, str) else json.dumps(v), MAX_OUTPUT_CHARS)
        for k, v in list((outputs or {}).items())[:MAX_OUTPUTS]
    }
    _set_request("finish", {"summary": _clip(str(summary), MAX_SUMMARY_CHARS), "outputs": values})


_started_at = int(time.time())


def requests_path() -> str:
    """The kit's requests file: REQUESTS_FILE in the checkpoint's folder."""
    return os.path.join(os.path.dirname(os.path.abspath(checkpoint_path())), REQUESTS_FILE)


def _set_request(kind: str, value: dict[str, Any] | None) -> None:
    """Write what this process asks into the requests file (whole). A process's first request
    keeps the results an earlier process in this sandbox handed over (its `finish`); what
    that one asked or reported was its own."""
    global _requests
    path = requests_path()
    if _requests is None:
        earlier = load_values(path).get("finish")
        _requests = {"finish": earlier} if isinstance(earlier, dict) else {}
    if value is None:
        if kind not in _requests:
            return
        _requests.pop(kind)
    else:
        _requests[kind] = value
    text = json.dumps(_requests, indent=1, sort_keys=True)
    write_whole(path, text, prefix=".overnight-requests-")


def _checkpoint_step() -> int:
    return as_int(load_values(checkpoint_path()).get("step", 0))


def _clip(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "\u2026"


def _answer(request_id: str) -> dict[str, Any] | None:
    folder = os.environ.get("OVERNIGHT_ANSWERS_DIR", ANSWERS_DIR)
    try:
        with open(os.path.join(folder, request_id + ".json"), encoding="utf-8") as source:
            answer = json.load(source)
    except (OSError, ValueError):
        return None
    if isinstance(answer, dict) and answer.get("id") == request_id:
        return answer
    return None


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "replace")).hexdigest()[:12]


def _epoch(when: Any) -> float:
    if isinstance(when, _dt.datetime):
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.timezone.utc)  # noqa: UP017 (Python 3.8)
        return float(when.timestamp())
    if isinstance(when, (int, float)) and not isinstance(when, bool):
        return float(when)
    if isinstance(when, str):
        return _epoch(_dt.datetime.fromisoformat(when.strip().replace("Z", "+00:00")))
    raise TypeError(f"wait_until needs a datetime, epoch seconds or ISO text, not {when!r}")
