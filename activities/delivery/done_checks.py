"""The done check's activity: one command of `RunSpec.done_when` run in the run's check sandbox
(activities/delivery/done_sandbox.py: a clean clone at the run's pushed commit), or one of
`done_when_in_place` in the agent's own sandbox, in the spec's `cwd`, after the agent exited 0.

Its output is the agent's, so hostile: the command runs under `timeout` (its own limit; a
check that hangs is ended there and counts as failed) with its stdout and stderr going through
`tail -c` inside the sandbox, so no more than `OUTPUT_READ_BYTES` ever reach the worker, however
much it prints; the provider's own time limit is a backstop for a check that escapes both. What
comes back is decoded leniently, redacted of the run's secrets and cut to a tail. A failure is
written for the agent in `DONE_CHECK_FILE` of its own sandbox (best effort); a pass in the
agent's sandbox removes that file.

Running a check again is harmless, so a retry (a worker lost mid-check) simply runs it again.
"""

from __future__ import annotations

import logging
import os
import shlex
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from temporalio import activity

from activities.errors import activity_errors
from activities.heartbeat import auto_heartbeat
from activities.models import ActivityName, RunDoneCheckInput
from activities.providers.protocol import CommandOutput, ProviderError, SandboxProvider
from overnight.core.done_check import (
    DONE_CHECK_FILE,
    FAILED_TAIL_BYTES,
    FAILED_TAIL_LINES,
    FILE_TAIL_BYTES,
    FILE_TAIL_LINES,
    OUTPUT_READ_BYTES,
    PASSED_TAIL_BYTES,
    PASSED_TAIL_LINES,
    DoneCheck,
    failure_file_text,
    outcome,
)
from overnight.core.output_tail import cut_tail, redact, secret_values

logger = logging.getLogger(__name__)

ProviderGetter = Callable[[str], Awaitable[SandboxProvider]]

# After its limit a check is sent SIGTERM, then SIGKILL this much later.
KILL_AFTER_SECONDS = 5
# The provider's own limit on the whole command: past the check's, for `timeout` to act first.
BACKSTOP_SECONDS = KILL_AFTER_SECONDS + 30
# GNU timeout's exit codes for a command it ended (TERM; KILL after --kill-after).
TIMEOUT_EXIT_CODES = (124, 137)
# A check ending with one of them this close to its limit was ended by it.
TIMEOUT_SLACK_SECONDS = 0.5
# The wrapper's own stderr (bash's complaints, outside the pipe) kept at most.
WRAPPER_STDERR_BYTES = 4096


def check_script(
    command: str, env: Mapping[str, str], timeout_seconds: float, cwd: str | None = None
) -> str:
    """The bash script that runs `command` with `env`, ended at `timeout_seconds`, its output's
    last `OUTPUT_READ_BYTES` printed; it exits with the check's own status. What the check
    left running in its process group (`timeout` leads one) is ended with it: a server it
    started in the background would otherwise hold the output open, and the answer, until
    the provider's backstop. `cwd`: changed to first (a check sandbox's clone may lack it:
    the check then fails, saying so)."""
    exports = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())
    enter = f"  cd -- {shlex.quote(cwd)} 2>&1 || exit 1\n" if cwd is not None else ""
    return (
        f"{exports}"
        "{\n"
        f"{enter}"
        f"  timeout --kill-after={KILL_AFTER_SECONDS} {timeout_seconds:g} "
        f"bash -c {shlex.quote(command)} </dev/null 2>&1 &\n"
        "  check=$!\n"
        '  wait "$check"\n'
        "  status=$?\n"
        '  kill -KILL -- "-$check" 2>/dev/null\n'
        '  exit "$status"\n'
        f"}} | tail -c {OUTPUT_READ_BYTES}\n"
        "status=${PIPESTATUS[0]}\n"
        f'if [ "$status" = 0 ]; then rm -f {DONE_CHECK_FILE}; fi\n'
        'exit "$status"\n'
    )


def output_bytes(ran: CommandOutput) -> bytes:
    """The check's output as bytes, bounded whatever the provider handed back."""
    out = ran.stdout.encode("utf-8", errors="replace")[-OUTPUT_READ_BYTES:]
    err = ran.stderr.encode("utf-8", errors="replace")[-WRAPPER_STDERR_BYTES:]
    return out + err if not err or not out or out.endswith(b"\n") else out + b"\n" + err


def timed_out(ran: CommandOutput, seconds: float, timeout_seconds: float) -> bool:
    if ran.timed_out:
        return True
    return (
        ran.exit_code in TIMEOUT_EXIT_CODES and seconds >= timeout_seconds - TIMEOUT_SLACK_SECONDS
    )


class DoneCheckActivities:
    def __init__(self, provider: ProviderGetter, heartbeat_seconds: float | None = None) -> None:
        self._provider = provider
        self._heartbeat_seconds = heartbeat_seconds

    def all(self) -> list[Callable[..., Any]]:
        return [self.run_done_check]

    @activity.defn(name=ActivityName.RUN_DONE_CHECK)
    async def run_done_check(self, input: RunDoneCheckInput) -> DoneCheck:
        provider = await self._provider(input.provider)
        # In the check sandbox the clone may lack `cwd`: entered by the script, which says so.
        fresh = input.tell_sandbox_id is not None
        script = check_script(
            input.command, input.env, input.timeout_seconds, input.cwd if fresh else None
        )
        started = time.monotonic()
        async with auto_heartbeat(self._heartbeat_seconds):
            with activity_errors():
                ran = await provider.run(
                    input.sandbox_id,
                    script,
                    cwd="/workspace" if fresh else input.cwd,
                    timeout_seconds=input.timeout_seconds + BACKSTOP_SECONDS,
                )
        seconds = time.monotonic() - started
        ended = timed_out(ran, seconds, input.timeout_seconds)
        passed = ran.exit_code == 0 and not ended
        data = output_bytes(ran)
        whole = len(data) < OUTPUT_READ_BYTES
        secrets = secret_values(input.secret_env, os.environ)
        lines, most = (
            (PASSED_TAIL_LINES, PASSED_TAIL_BYTES)
            if passed
            else (FAILED_TAIL_LINES, FAILED_TAIL_BYTES)
        )
        shown = cut_tail(data, secrets, from_start=whole, lines=lines, max_bytes=most)
        check = DoneCheck(
            command=input.command,
            index=input.index,
            round=input.round,
            passed=passed,
            exit_code=None if ran.timed_out else ran.exit_code,
            timed_out=ended,
            seconds=round(seconds, 3),
            tail=shown.text,
            truncated=shown.truncated,
            at=datetime.now(UTC),
            commit=input.commit,
            in_place=input.in_place,
        )
        if not passed:
            told = cut_tail(
                data, secrets, from_start=whole, lines=FILE_TAIL_LINES, max_bytes=FILE_TAIL_BYTES
            )
            how = outcome(check, input.timeout_seconds)
            command = redact(input.command, secrets)
            text = failure_file_text(command, how, told.text, told.truncated)
            await tell_agent(provider, input.tell_sandbox_id or input.sandbox_id, text)
        return check


async def tell_agent(provider: SandboxProvider, sandbox_id: str, text: str) -> None:
    """Write a failure for the agent in its sandbox's `DONE_CHECK_FILE`. Best effort: the
    agent's restart reason names the check even without the file."""
    try:
        await provider.write_file(sandbox_id, DONE_CHECK_FILE, text.encode())
    except (ProviderError, OSError) as error:
        logger.warning("could not write %s in %s: %s", DONE_CHECK_FILE, sandbox_id, error)
