"""`overnight start`'s look at the run it has just started: the worker's word on it, in seconds.

A worker refuses a spec that asks for what it does not grant (overnight/core/grants.py), and a run
whose first create cannot work (a repo that is not there, an `agent_dir` not on the worker)
fails at once: both within a second or two of the start. `start` used to exit 0 before either,
and only `overnight status` said why. So it looks, for at most `wait_seconds()`, until the
run is past its spec check and first create (its agent runs), has failed, or needs a person,
reading the `status` query (a closed run's failure from its result), and says which: exit 2
with the worker's one line when the run is refused, fails at start or needs a person.
`start --no-wait` skips the look; `start --wait` waits for the end instead.

The verdicts are pure (`verdict`, `after_the_wait`); `look` is the loop around them.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from datetime import timedelta

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from overnight.core.agent_text import terminal_line
from overnight.core.errors import SPEC_UNUSABLE
from overnight.core.grants import SPEC_REFUSED
from overnight.core.models import RunStatus

# How long `start` waits for the worker's word (seconds): long enough for a spec check and a
# local create on a busy machine; a slow machine (or a test) may set it longer.
WAIT_ENV = "OVERNIGHT_START_WAIT_SECONDS"
DEFAULT_WAIT_SECONDS = 15.0
# Each status query's bound: a worker that does not answer must not hold the look past its end.
QUERY_TIMEOUT = timedelta(seconds=3)
LOOK_EVERY_SECONDS = 0.3
# States a run is only in once its first sandbox is made and its agent started.
PAST_FIRST_CREATE = frozenset(
    {"running", "restarting", "waiting_for_answer", "finishing", "finished", "cancelled"}
)
# A failure of the run's spec (exit 2, as `start --wait` says it); any other is exit 1.
SPEC_FAILURES = frozenset({SPEC_REFUSED, "InvalidSpec", SPEC_UNUSABLE})


@dataclass(frozen=True)
class Look:
    """What `start` says of the run: `going` (exit 0, `line` on stdout) or not (`line` on
    stderr; exit 2 when it is the spec's or the worker's to fix, `bad_input`, else 1)."""

    going: bool
    line: str
    bad_input: bool = True


def wait_seconds() -> float:
    """The look's bound: `OVERNIGHT_START_WAIT_SECONDS` when it is a positive number."""
    try:
        seconds = float(os.environ.get(WAIT_ENV, ""))
    except ValueError:
        return DEFAULT_WAIT_SECONDS
    return seconds if 0 < seconds < 24 * 3600 else DEFAULT_WAIT_SECONDS


def verdict(run_id: str, status: RunStatus) -> Look | None:
    """What an open run's status says at once; None: look again (queued, starting, or failed
    and about to close: its closed failure says it whole)."""
    if status.state in PAST_FIRST_CREATE:
        said = status.state.replace("_", " ")
        if status.sandbox_id:
            said += f" (attempt {status.attempt}, sandbox {status.sandbox_id})"
        return Look(True, f"{run_id} is {said}: overnight logs {run_id} --follow")
    if status.state == "needs_attention":
        why = terminal_line(status.attention_reason or "see overnight status")
        return Look(False, f"run {run_id} needs you: {why} (overnight status {run_id})")
    return None


def after_the_wait(
    run_id: str, status: RunStatus | None, *, worker_took_it: bool, task_queue: str
) -> Look:
    """What `start` says when the wait ends with no verdict: still going its way (exit 0)."""
    if status is not None and status.state == "failed" and status.failure:
        return Look(False, terminal_line(status.failure))
    if not worker_took_it:
        return Look(
            True,
            f"{run_id}: no worker has taken it yet: is one polling task queue {task_queue!r}? "
            "(overnight dev runs one)",
        )
    if status is None:
        return Look(True, f"{run_id}: no worker answered for it yet (overnight status {run_id})")
    if status.state == "queued":
        return Look(True, f"{run_id} is queued: it waits for a place among its pool's runs")
    waits = f": {terminal_line(status.waiting_on)}" if status.waiting_on else ""
    return Look(True, f"{run_id} is still starting{waits} (overnight status {run_id})")


async def look(client: Client, run_id: str, *, task_queue: str, seconds: float) -> Look:
    """Look at the run until a verdict, or for `seconds`."""
    handle = client.get_workflow_handle(run_id)
    deadline = time.monotonic() + seconds
    status: RunStatus | None = None
    took = False
    while True:
        described = await handle.describe()
        if described.status != WorkflowExecutionStatus.RUNNING:
            return await _closed(client, run_id, described.status)
        # Its start event and first task: more means a worker has taken the run.
        took = took or described.history_length > 2
        status = await _status(client, run_id) or status
        found = verdict(run_id, status) if status is not None else None
        if found is not None:
            return found
        if time.monotonic() >= deadline:
            return after_the_wait(run_id, status, worker_took_it=took, task_queue=task_queue)
        await asyncio.sleep(LOOK_EVERY_SECONDS)


async def _status(client: Client, run_id: str) -> RunStatus | None:
    try:
        found: RunStatus = await client.get_workflow_handle(run_id).query(
            "status", result_type=RunStatus, rpc_timeout=QUERY_TIMEOUT
        )
    except Exception:  # no worker answered yet, or the run is between its first tasks
        return None
    return found


async def _closed(client: Client, run_id: str, status: WorkflowExecutionStatus | None) -> Look:
    """A run already closed: its failure's one line, or how it ended."""
    if status == WorkflowExecutionStatus.COMPLETED:
        return Look(True, f"{run_id} has ended already (overnight status {run_id})")
    if status != WorkflowExecutionStatus.FAILED:
        word = status.name.lower() if status is not None else "closed"
        return Look(False, f"run {run_id} has ended already: {word}", bad_input=False)
    try:
        await client.get_workflow_handle(run_id).result()
    except WorkflowFailureError as err:
        cause = err.cause
        if isinstance(cause, ApplicationError):
            return Look(False, terminal_line(cause.message), cause.type in SPEC_FAILURES)
        return Look(False, terminal_line(str(cause or err)), bad_input=False)
    return Look(True, f"{run_id} has ended already (overnight status {run_id})")
