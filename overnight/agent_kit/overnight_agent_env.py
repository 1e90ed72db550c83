"""What overnight tells an agent through its environment: the run, the attempt, why this start
is a restart (a failed done check's output among them), where the checkpoint is and the exit
code that asks for a fresh context.

A sibling of `overnight_agent`, which re-exports every name here (agents import them from
`overnight_agent`); apart so that the kit's requests (`overnight_agent_requests`) read the same
environment without importing the kit whole. Standard library only, Python 3.8 or newer.
"""

from __future__ import annotations

import os

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
# tail of its output in DONE_CHECK_FILE (overnight.core.done_check).
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
