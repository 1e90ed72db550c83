"""overnight's agent kit: the two rules of a recoverable agent, done once, right.

Every sandbox overnight starts has this file and its siblings (`overnight_agent_env`,
`overnight_agent_requests`, `overnight_agent_files`) on the agent's `PYTHONPATH`, so an agent
writes

    from overnight_agent import Checkpoint, fresh_context

with nothing to install. Every name of the kit is importable from here (`__all__`); the
siblings hold the environment overnight gives, the requests to the supervisor (`ask`,
`wait_until`, `report_usage`, `finish`) and the atomic write. Standard library only, Python 3.8
or newer (annotations are never evaluated, thanks to `from __future__ import annotations`).

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

import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING or __package__:  # imported as overnight.agent_kit.overnight_agent
    from overnight.agent_kit.overnight_agent_env import (
        CI_CHECK_REASON,
        DONE_CHECK_FILE,
        DONE_CHECK_REASON,
        FRESH_CONTEXT_EXIT_CODE,
        MAX_DONE_CHECK_BYTES,
        attempt,
        checkpoint_path,
        done_check_failure,
        fresh_context_exit_code,
        restart_reason,
        run_id,
    )
    from overnight.agent_kit.overnight_agent_files import as_int, as_strings, as_text, write_whole
    from overnight.agent_kit.overnight_agent_requests import (
        ANSWERS_DIR,
        MAX_CHOICE_CHARS,
        MAX_CHOICES,
        MAX_MODEL_CHARS,
        MAX_OUTPUT_CHARS,
        MAX_OUTPUT_NAME_CHARS,
        MAX_OUTPUTS,
        MAX_QUESTION_CHARS,
        MAX_REASON_CHARS,
        MAX_SUMMARY_CHARS,
        REQUESTS_FILE,
        REQUESTS_KEY,
        RESERVED_OUTPUT_NAMES,
        ask,
        finish,
        report_usage,
        requests_path,
        wait_until,
    )
else:  # as agents import it: the kit's folder on PYTHONPATH
    from overnight_agent_env import (
        CI_CHECK_REASON,
        DONE_CHECK_FILE,
        DONE_CHECK_REASON,
        FRESH_CONTEXT_EXIT_CODE,
        MAX_DONE_CHECK_BYTES,
        attempt,
        checkpoint_path,
        done_check_failure,
        fresh_context_exit_code,
        restart_reason,
        run_id,
    )
    from overnight_agent_files import as_int, as_strings, as_text, write_whole
    from overnight_agent_requests import (
        ANSWERS_DIR,
        MAX_CHOICE_CHARS,
        MAX_CHOICES,
        MAX_MODEL_CHARS,
        MAX_OUTPUT_CHARS,
        MAX_OUTPUT_NAME_CHARS,
        MAX_OUTPUTS,
        MAX_QUESTION_CHARS,
        MAX_REASON_CHARS,
        MAX_SUMMARY_CHARS,
        REQUESTS_FILE,
        REQUESTS_KEY,
        RESERVED_OUTPUT_NAMES,
        ask,
        finish,
        report_usage,
        requests_path,
        wait_until,
    )

# The kit's names, as agents import them (`from overnight_agent import ...`).
__all__ = [
    "ANSWERS_DIR",
    "CI_CHECK_REASON",
    "DONE_CHECK_FILE",
    "DONE_CHECK_REASON",
    "FRESH_CONTEXT_EXIT_CODE",
    "MAX_CHOICES",
    "MAX_CHOICE_CHARS",
    "MAX_DONE_CHECK_BYTES",
    "MAX_MODEL_CHARS",
    "MAX_OUTPUTS",
    "MAX_OUTPUT_CHARS",
    "MAX_OUTPUT_NAME_CHARS",
    "MAX_QUESTION_CHARS",
    "MAX_REASON_CHARS",
    "MAX_SUMMARY_CHARS",
    "REQUESTS_FILE",
    "REQUESTS_KEY",
    "RESERVED_OUTPUT_NAMES",
    "SNAPSHOT_ANSWER",
    "SNAPSHOT_REQUEST_KEY",
    "Checkpoint",
    "ask",
    "attempt",
    "checkpoint_path",
    "done_check_failure",
    "finish",
    "fresh_context",
    "fresh_context_exit_code",
    "recovery",
    "report_usage",
    "requests_path",
    "restart_reason",
    "run_id",
    "snapshot_here",
    "wait_until",
]


class Checkpoint:
    """The agent's checkpoint: load it at start, change it, `save()` after every step."""

    def __init__(self, path: str, values: dict[str, Any] | None = None) -> None:
        values = dict(values or {})
        self.path = path
        self.step: int = as_int(values.pop("step", 0))
        self.plan: list[str] = as_strings(values.pop("plan", []))
        self.next: str | None = as_text(values.pop("next", None))
        self.notes: list[str] = as_strings(values.pop("notes", []))
        self.done_actions: list[str] = as_strings(values.pop("done_actions", []))
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
        write_whole(self.path, json.dumps(self.to_dict(), indent=1, sort_keys=True))


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
    number = as_int(checkpoint.data.get(SNAPSHOT_REQUEST_KEY, 0)) + 1
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
        if isinstance(answer, dict) and as_int(answer.get("request")) >= number:
            return answer
        time.sleep(poll)
    return None
