"""overnight's agent kit: the two rules of a recoverable agent, done once, right.

Every sandbox overnight starts has this file on the agent's `PYTHONPATH`, so an agent writes

    from overnight_agent import Checkpoint, fresh_context

with nothing to install. Standard library only, Python 3.8 or newer (annotations are never
evaluated, thanks to `from __future__ import annotations`).

1. **Checkpoints are atomic.** `Checkpoint.save()` writes a temp file in the same folder,
   fsyncs it, renames it over the checkpoint and fsyncs the folder: a crash at any moment
   leaves the previous checkpoint or the new one, never a torn file.
2. **Outside actions carry a key fixed per step.** `checkpoint.action_key(step)` is
   `{run_id}-step-{step}`, the same on every attempt, so a step redone after a crash finds its
   action already done (`checkpoint.done(key)`, or the outside service's own idempotency).

The checkpoint is JSON: `step` (steps done), `plan`, `next` (what comes next, shown in
`overnight status`), `notes` (the last one shown too), `done_actions` (keys of outside actions
done), plus anything else the agent keeps in `data`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import sys
import tempfile
import time
from typing import Any, NoReturn

FRESH_CONTEXT_EXIT_CODE = 75


def run_id() -> str:
    return os.environ.get("OVERNIGHT_RUN_ID", "local-run")


def attempt() -> int:
    """1 for the first sandbox, 2 for the first restart, ..."""
    try:
        return int(os.environ.get("OVERNIGHT_ATTEMPT", "1"))
    except ValueError:
        return 1


def restart_reason() -> str:
    """Why this start is a restart ("agent crashed (exit 3)", ...); empty on the first."""
    return os.environ.get("OVERNIGHT_RESTART_REASON", "")


# A failed done check (the spec's `done_when`): overnight started this agent again, in the same
# sandbox, with a restart reason beginning DONE_CHECK_REASON and the check's command and the
# tail of its output in DONE_CHECK_FILE (overnight.done_check).
# A failing CI check of the run's pull request (`pull_request.until_checks_pass`) is told the
# same way: a restart reason beginning CI_CHECK_REASON, the check and its log's tail in the file.
DONE_CHECK_FILE = "/workspace/.overnight/done-check.txt"
DONE_CHECK_REASON = "done check failed"
CI_CHECK_REASON = "CI check failed"
MAX_DONE_CHECK_BYTES = 64 * 1024


def done_check_failure() -> str | None:
    """Why overnight started this agent again after it exited 0: the done check that failed
    (its command, how it ended, the tail of its output), or None when this start is not for
    one. Fix what it says and exit 0 again: overnight runs every check again. A failing CI
    check of the run's pull request is told the same way (its name and its log's tail)."""
    reason = restart_reason()
    if not reason.startswith((DONE_CHECK_REASON, CI_CHECK_REASON)):
        return None
    path = os.environ.get("OVERNIGHT_DONE_CHECK_FILE", DONE_CHECK_FILE)
    try:
        with open(path, "rb") as source:
            data = source.read(MAX_DONE_CHECK_BYTES)
    except OSError:
        return reason
    return data.decode("utf-8", errors="replace").strip() or reason


def checkpoint_path() -> str:
    return os.environ.get("OVERNIGHT_CHECKPOINT", "/workspace/checkpoint.json")


def fresh_context_exit_code() -> int:
    try:
        return int(os.environ.get("OVERNIGHT_FRESH_CONTEXT_EXIT_CODE", FRESH_CONTEXT_EXIT_CODE))
    except ValueError:
        return FRESH_CONTEXT_EXIT_CODE


class Checkpoint:
    """The agent's checkpoint: load it at start, change it, `save()` after every step."""

    def __init__(self, path: str, values: dict[str, Any] | None = None) -> None:
        values = dict(values or {})
        self.path = path
        self.step: int = _int(values.pop("step", 0))
        self.plan: list[str] = _strings(values.pop("plan", []))
        self.next: str | None = _text(values.pop("next", None))
        self.notes: list[str] = _strings(values.pop("notes", []))
        self.done_actions: list[str] = _strings(values.pop("done_actions", []))
        # Everything else the agent keeps, saved as it is.
        self.data: dict[str, Any] = values

    @classmethod
    def load(cls, path: str | None = None) -> Checkpoint:
        """The checkpoint at `path` (default: `OVERNIGHT_CHECKPOINT`); an empty one when there
        is none yet. One that is not a JSON object is not trusted: empty, with a note."""
        path = path or checkpoint_path()
        try:
            with open(path, encoding="utf-8") as source:
                values = json.load(source)
        except FileNotFoundError:
            return cls(path)
        except (OSError, ValueError) as error:
            fresh = cls(path)
            fresh.note(f"checkpoint at {path} could not be read ({error}); starting over")
            return fresh
        if not isinstance(values, dict):
            fresh = cls(path)
            fresh.note(f"checkpoint at {path} is not a JSON object; starting over")
            return fresh
        return cls(path, values)

    def to_dict(self) -> dict[str, Any]:
        known = {
            "step": self.step,
            "plan": self.plan,
            "next": self.next,
            "notes": self.notes,
            "done_actions": self.done_actions,
        }
        return {**self.data, **known}

    def note(self, text: str) -> None:
        self.notes.append(text)

    def action_key(self, step: int | None = None) -> str:
        """The key of the outside action of `step` (default: the step being done now, i.e.
        `self.step + 1`): the same on every attempt of this run."""
        return f"{run_id()}-step-{self.step + 1 if step is None else step}"

    def done(self, key: str) -> bool:
        return key in self.done_actions

    def mark_done(self, key: str) -> None:
        if key not in self.done_actions:
            self.done_actions.append(key)

    def save(self) -> None:
        """Replace the checkpoint whole or not at all (temp file, fsync, rename, fsync)."""
        _write_whole(self.path, json.dumps(self.to_dict(), indent=1, sort_keys=True))


def fresh_context(summary: str, checkpoint: Checkpoint | None = None) -> NoReturn:
    """Save `summary` into the checkpoint's notes and exit with the fresh-context code: overnight
    starts the agent again in the same sandbox, with a fresh context and this checkpoint."""
    checkpoint = checkpoint or Checkpoint.load()
    checkpoint.note(summary)
    checkpoint.save()
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(fresh_context_exit_code())


# Snapshot recovery (`recovery: "snapshot"` in the run's spec). The request travels in the
# checkpoint (overnight already watches it): `snapshot_request`, a number greater than the last.
# The answer comes back in SNAPSHOT_ANSWER: {"request", "state": "ready"|"failed", "snapshot_id"}.
SNAPSHOT_REQUEST_KEY = "snapshot_request"
SNAPSHOT_ANSWER = "/workspace/.overnight/snapshot.json"


def recovery() -> str:
    """How this run recovers: "checkpoint" or "snapshot" (`OVERNIGHT_RECOVERY`)."""
    return os.environ.get("OVERNIGHT_RECOVERY", "checkpoint")


def snapshot_here(
    checkpoint: Checkpoint | None = None, timeout: float = 1800, poll: float = 0.2
) -> dict[str, Any] | None:
    """Ask overnight for a snapshot of the whole sandbox now, and wait until it is taken.

    Call it at a safe point: between steps, after `checkpoint.save()`, never during a model
    call (the sandbox is paused while it is captured). Files, a database the agent filled, a
    warm cache, a dev server it configured, come back on a restart from this snapshot instead
    of being rebuilt. Returns the answer (`{"request", "state", "snapshot_id"}`; `state` is
    "failed" when the capture failed, which overnight tries again later), or None when the run
    does not use snapshots or no answer came within `timeout` seconds (the agent goes on
    either way). Captures are at least the spec's `snapshot_every_seconds` apart: a request
    sooner waits for that.
    """
    if recovery() != "snapshot":
        return None
    checkpoint = checkpoint or Checkpoint.load()
    number = _int(checkpoint.data.get(SNAPSHOT_REQUEST_KEY, 0)) + 1
    checkpoint.data[SNAPSHOT_REQUEST_KEY] = number
    checkpoint.save()
    answer_path = os.environ.get("OVERNIGHT_SNAPSHOT_ANSWER", SNAPSHOT_ANSWER)
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        try:
            with open(answer_path, encoding="utf-8") as source:
                answer = json.load(source)
        except (OSError, ValueError):
            answer = None
        if isinstance(answer, dict) and _int(answer.get("request")) >= number:
            return answer
        time.sleep(poll)
    return None


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
# The supervisor's limits (overnight.agent_requests): it refuses a question over them, and
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


# What the supervisor refuses of an output's name (overnight.agent_requests): one that is not
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
        earlier = _load_values(path).get("finish")
        _requests = {"finish": earlier} if isinstance(earlier, dict) else {}
    if value is None:
        if kind not in _requests:
            return
        _requests.pop(kind)
    else:
        _requests[kind] = value
    text = json.dumps(_requests, indent=1, sort_keys=True)
    _write_whole(path, text, prefix=".overnight-requests-")


def _load_values(path: str) -> dict[str, Any]:
    """The JSON object in `path`; empty when there is none (or it is not one)."""
    try:
        with open(path, encoding="utf-8") as source:
            values = json.load(source)
    except (OSError, ValueError):
        return {}
    return values if isinstance(values, dict) else {}


def _checkpoint_step() -> int:
    return _int(_load_values(checkpoint_path()).get("step", 0))


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


def _write_whole(path: str, text: str, prefix: str = ".checkpoint-") -> None:
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    _fsync_folder(folder)


def _fsync_folder(folder: str) -> None:
    """Make the rename itself durable (where the platform allows opening a folder)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
