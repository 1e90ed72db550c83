"""What a run is waiting on right now, for `overnight status` and `overnight list`: its
activities that failed and wait for their next try, with why, in one line each
(`create sandbox, try 9 of 16, next in 4 min: cloning URL: connection refused`).

The run's own status cannot say it: an activity's retries are the server's, not the workflow's,
until they run out. DescribeWorkflowExecution's pending activities can (the try, the last
failure, when the next try is due); the Web UI shows the same under Pending Activities.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import Client

from overnight.cli.client import RunSummary
from overnight.cli.render import terminal_safe

# A failure message is an error's first line, as long as a status line may be.
MESSAGE_CHARS = 300
# `overnight status`'s label for these lines.
LABEL = "  waiting on:    "
# `overnight list` describes at most this many open runs at once (one server call each).
DESCRIBE_AT_ONCE = 8


async def retrying_lines(client: Client, run_id: str, now: datetime) -> list[str]:
    """`overnight status`'s lines (labelled) for each activity of the run retried after a
    failure; [] when none is (or the server cannot tell)."""
    return [LABEL + line for line in await waiting_on(client, run_id, now)]


async def waiting_on(client: Client, run_id: str, now: datetime) -> list[str]:
    """One line per activity of the run waiting for its next try after a failure."""
    try:
        described = await client.get_workflow_handle(run_id).describe()
    except Exception:  # noqa: BLE001 - best effort: the status itself was read
        return []
    return [
        line
        for pending in described.raw_description.pending_activities
        if (line := retrying_line(pending, now)) is not None
    ]


async def with_waiting_on(
    client: Client, runs: Sequence[RunSummary], now: datetime
) -> list[RunSummary]:
    """The runs, each open one with what it waits on (a few described at a time)."""
    room = asyncio.Semaphore(DESCRIBE_AT_ONCE)

    async def one(run: RunSummary) -> RunSummary:
        if run.workflow_status != "running":
            return run
        async with room:
            lines = await waiting_on(client, run.run_id, now)
        return run.model_copy(update={"waiting_on": lines}) if lines else run

    return list(await asyncio.gather(*(one(run) for run in runs)))


def retrying_line(pending: PendingActivityInfo, now: datetime) -> str | None:
    if pending.attempt <= 1 or not pending.last_failure.message:
        return None
    message = terminal_safe(pending.last_failure.message.splitlines()[0])[:MESSAGE_CHARS]
    tries = f"try {pending.attempt}"
    if pending.maximum_attempts > 0:
        tries += f" of {pending.maximum_attempts}"
    running = pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
    when = ", trying now" if running else ""
    if not when and pending.HasField("next_attempt_schedule_time"):
        wait = (pending.next_attempt_schedule_time.ToDatetime(now.tzinfo) - now).total_seconds()
        when = f", next in {wait_words(wait)}"
    name = pending.activity_type.name.replace("_", " ")
    return f"{name}, {tries}{when}: {message}"


def wait_words(seconds: float) -> str:
    """`12 s`, `4 min`, `1 h 05 min`."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
