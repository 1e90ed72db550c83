"""What no retry fixes, so the run fails at once rather than spend its restarts (or a person's
extension) failing the same way: a first sandbox whose create was refused for good (a repo that
does not exist or refuses, an `agent_dir` not on the worker, a worker that refuses the spec), and
an agent whose command was not found (exit 126 or 127 at its first start in a sandbox, before
any checkpoint). Pure: the run state and what was seen in, a `FailRun` (or None) out.

Only runs begun with `FAIL_FAST_PATCH` (`SupervisorState.fail_fast`) do it; later attempts of a
run that once worked keep the old way (a person decides: what changed is the world, not the spec).
"""

from __future__ import annotations

from dataclasses import dataclass

from overnight.core.errors import SPEC_UNUSABLE
from overnight.core.grants import SPEC_REFUSED
from workflows.pure.state import SupervisorState

# Create failures no retry changes, when nothing has run yet: the spec (or the worker's
# settings) must change, and a run cannot change its spec.
HOPELESS_CREATE_TYPES = frozenset(
    {
        SPEC_UNUSABLE,
        SPEC_REFUSED,
        "InvalidSpec",
        "InvalidRequest",
        "MissingSecret",
        "MissingCredentials",
        "AuthenticationFailed",
        "PermissionDenied",
    }
)
# A shell's "cannot execute" and "command not found".
NOT_RUNNABLE_EXIT_CODES = frozenset({126, 127})
AGAIN = "no retry can fix this: fix the spec (or the worker) and start the run again"


@dataclass(frozen=True)
class FailRun:
    """The run fails now, `reason` its one line; `error_type` its ApplicationError's type.
    `with_output`: the agent's last output line is added once read (a command not found)."""

    reason: str
    error_type: str = SPEC_UNUSABLE
    with_output: bool = False


def after_create_failed(s: SupervisorState, error_type: str | None, message: str) -> FailRun | None:
    """The first sandbox could not be made, for good: the run fails with why."""
    if (
        not s.fail_fast
        or s.attempt != 1
        or s.attempts.restarts
        or error_type not in HOPELESS_CREATE_TYPES
    ):
        return None
    kept = error_type if error_type in (SPEC_REFUSED, "InvalidSpec") else SPEC_UNUSABLE
    return FailRun(f"run {s.spec.run_id} cannot start: {_one_line(message)}; {AGAIN}", kept)


def after_exit(s: SupervisorState, exit_code: int | None) -> FailRun | None:
    """The agent exited 126/127 at its first start in this sandbox, having written nothing:
    its command is not there (or not executable), and a new sandbox would find the same."""
    if (
        not s.fail_fast
        or exit_code not in NOT_RUNNABLE_EXIT_CODES
        or s.attempts.process_fresh_start
    ):
        return None
    if s.progress.last_progress_at != s.sandbox.sandbox_started_at:
        return None  # it checkpointed since it started: it ran, and then something failed
    what = "was not found" if exit_code == 127 else "cannot be executed"
    command = _one_line(s.spec.command)[:120] if s.spec.agent is None else "the coding agent"
    return FailRun(
        f"run {s.spec.run_id}: the agent's command {what} (exit {exit_code} at its first start, "
        f"before any checkpoint; field command: {command})",
        with_output=True,
    )


def failure_text(s: SupervisorState, failed: FailRun) -> str:
    """The run's one line, with the agent's last output line when it was asked for and read."""
    if not failed.with_output:
        return failed.reason
    words = s.attempts.last_words
    last = ""
    if words is not None and words.tail:
        lines = [line.strip() for line in words.tail.splitlines() if line.strip()]
        last = _one_line(lines[-1])[:200] if lines else ""
    said = f"; it said: {last}" if last else ""
    return f"{failed.reason}{said}; {AGAIN}"


def _one_line(text: str) -> str:
    return " ".join(text.split())
