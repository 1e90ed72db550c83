"""The done check (`RunSpec.done_when`): commands that must all pass after the agent exits 0
for the run to be `finished`. They run against the run's pushed commit in a fresh sandbox of
their own, as CI would; `RunSpec.done_when_in_place` ones run in the agent's own sandbox.

The ground of it: the bounds a spec is held to, what one check's outcome is (`DoneCheck`),
and how a failure is worded for each place that shows it (the restart reason the agent gets,
the file it finds, the reason a person reads). Pure; the agent kit and the coding-agent
adapter read the same file by its path (`DONE_CHECK_FILE`).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

# Where a failed check is told to the agent started again (its command and its output's tail,
# secrets redacted); removed by the next check that passes.
DONE_CHECK_FILE = "/workspace/.overnight/done-check.txt"
# The agent's variable naming that file (mapped to its folder in an unisolated sandbox).
DONE_CHECK_FILE_ENV = "OVERNIGHT_DONE_CHECK_FILE"
# How the restart reason of an agent started again for a failed check begins.
DONE_CHECK_REASON = "done check failed"

# A spec's bounds: a handful of commands, each a line or a short script.
MAX_DONE_CHECKS = 20
MAX_DONE_CHECK_CHARS = 4000
# Each check's own time limit, seconds: under an hour, so one lease extension covers a check.
DEFAULT_DONE_CHECK_SECONDS = 600
MAX_DONE_CHECK_SECONDS = 3000
# Failed rounds a budget may allow (extensions add up past it).
MAX_DONE_CHECK_ROUNDS = 1000

# What of a check's output comes back from the sandbox (the tail, cut there by `tail -c`):
# the worker never holds more of it than this, however much the check prints.
OUTPUT_READ_BYTES = 64 * 1024
# What the file for the agent holds of a failed check's output, and what the status, the
# card and the result hold (a failed check's tail, and less of a passed one's).
FILE_TAIL_LINES = 200
FILE_TAIL_BYTES = 16 * 1024
FAILED_TAIL_LINES = 40
FAILED_TAIL_BYTES = 4096
PASSED_TAIL_LINES = 10
PASSED_TAIL_BYTES = 1024
# A command shown in a reason is cut to this.
SHOWN_COMMAND_CHARS = 200


class DoneCheck(BaseModel):
    """One check's outcome, as the status, the card and the result show it."""

    model_config = ConfigDict(extra="forbid")

    command: str
    # Its place in `done_when` (0 first), and the round (1: after the agent's first exit 0).
    index: int
    round: int
    passed: bool
    exit_code: int | None = None
    # Ended at `done_check_timeout_seconds` (counts as failed).
    timed_out: bool = False
    seconds: float = 0
    # The tail of its stdout and stderr together, secrets redacted.
    tail: str = ""
    truncated: bool = False
    at: datetime
    # Where it ran: the commit of the run's work it was checked against, in a fresh sandbox
    # (None: in the agent's own sandbox, `done_when_in_place`, or a run begun before).
    commit: str | None = None
    # One of `done_when_in_place` (its `index` is in that list).
    in_place: bool = False
    # Why it could not be run against the work (the work could not be pushed, the origin does
    # not hold it): a failed check with no exit code.
    problem: str = ""


def check_done_when(commands: list[str], field: str = "done_when") -> list[str]:
    """The spec's `done_when` (or `done_when_in_place`), refused when a command is empty, too
    long or not a command."""
    if len(commands) > MAX_DONE_CHECKS:
        raise ValueError(f"{field} may hold at most {MAX_DONE_CHECKS} commands")
    for number, command in enumerate(commands, start=1):
        if not command.strip():
            raise ValueError(f"{field} command {number} is empty")
        if len(command) > MAX_DONE_CHECK_CHARS:
            raise ValueError(
                f"{field} command {number} is longer than {MAX_DONE_CHECK_CHARS} characters"
            )
        if "\x00" in command:
            raise ValueError(f"{field} command {number} contains a NUL byte")
    return commands


def shown_command(command: str) -> str:
    """A command as a reason names it: one line, cut short."""
    line = " ".join(command.split())
    if len(line) > SHOWN_COMMAND_CHARS:
        line = line[: SHOWN_COMMAND_CHARS - 3] + "..."
    return f"`{line}`"


def outcome(check: DoneCheck, timeout_seconds: float) -> str:
    """How a failed check ended: `exit 1`, `timed out after 600 s`, or why it could not run."""
    if check.problem:
        return check.problem
    if check.timed_out:
        return f"timed out after {timeout_seconds:g} s and was ended"
    if check.exit_code is None:
        return "ended without an exit code"
    return f"exit {check.exit_code}"


def failure_reason(check: DoneCheck, timeout_seconds: float) -> str:
    """The restart reason of the agent started again: which check failed, and how."""
    return (
        f"{DONE_CHECK_REASON}: {shown_command(check.command)} ({outcome(check, timeout_seconds)})"
    )


def exhausted_reason(check: DoneCheck, used: int, most: int, timeout_seconds: float) -> str:
    """Why a run needs a person once its failed rounds are used up; the last failure named."""
    rounds = "round" if used == 1 else "rounds"
    return (
        f"done checks used up ({used} failed {rounds} of {most} allowed): last, "
        f"{shown_command(check.command)} ({outcome(check, timeout_seconds)})"
    )


def failure_file_text(command: str, how: str, tail: str, truncated: bool) -> str:
    """What the agent started again finds in `DONE_CHECK_FILE`."""
    cut = " (its start cut)" if truncated else ""
    return (
        "overnight ran the done check below after you exited 0, and it failed, so the task is "
        "not finished yet. Fix what it reports, then finish again (exit 0): overnight runs "
        "every check again.\n\n"
        f"command: {command}\n"
        f"result: {how}\n\n"
        f"output{cut}:\n{tail}\n"
    )
