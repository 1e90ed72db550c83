"""`overnight reap` on a Temporal Schedule the worker sets up at its start.

The schedule `overnight-reap` starts the `OvernightReap` workflow (workflows.reap_run) every
`REAP_EVERY` on the worker's task queue; its one activity, `reap_sandboxes`, runs the reap of
overnight.worker.reaping with the providers this worker's environment configures. Setting it up is
idempotent: a worker that finds it made (by another worker, or itself before a restart) leaves
it as it is, so a person may pause, change or delete it with the stock `temporal schedule`
commands and no worker undoes that (a deleted one is made again by the next worker to start).
Local sandboxes live on one machine: the reap deletes those of the machine whose worker takes
the activity (a Runtime key's, from any).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from temporalio import activity
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.service import RPCError

from activities.models import ActivityName, ReapSummary
from activities.providers.registry import open_configured
from overnight.worker.reap_entries import ReapedSandbox, released_line
from overnight.worker.reaping import reap
from workflows.reap_run import REAP_WORKFLOW

REAP_SCHEDULE_ID = "overnight-reap"
REAP_EVERY = timedelta(hours=1)
# The summary's lines (the count and the bytes are always whole).
SUMMARY_LINES = 50
logger = logging.getLogger(__name__)


class ReapActivities:
    def __init__(self, client: Client) -> None:
        self._client = client

    @activity.defn(name=ActivityName.REAP_SANDBOXES)
    async def reap_sandboxes(self) -> ReapSummary:
        async with open_configured() as providers:
            reaped = await reap(self._client, providers)
        lines = [_line(entry) for entry in reaped]
        summary = ReapSummary(
            deleted=sum(1 for entry in reaped if entry.stopped and entry.kind != "released"),
            failed=sum(1 for entry in reaped if not entry.stopped),
            freed_bytes=sum(entry.freed_bytes or 0 for entry in reaped),
            lines=lines[:SUMMARY_LINES],
        )
        activity.logger.info("reaped %d, %d failed", summary.deleted, summary.failed)
        return summary


def reap_schedule(task_queue: str) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            REAP_WORKFLOW,
            id=REAP_SCHEDULE_ID,
            task_queue=task_queue,
            execution_timeout=REAP_EVERY,
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=REAP_EVERY)]),
        # One reap at a time: an hour's run still going skips the next.
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
        state=ScheduleState(note="made by an overnight worker: `overnight reap` every hour"),
    )


async def ensure_reap_schedule(client: Client, task_queue: str) -> bool:
    """Make the reap's schedule unless it exists; True when made here. Never raises: a worker
    that cannot make it (no permission, an old server) logs why and runs on."""
    try:
        await client.create_schedule(REAP_SCHEDULE_ID, reap_schedule(task_queue))
    except ScheduleAlreadyRunningError:
        return False
    except RPCError as err:
        logger.warning("the hourly reap's schedule could not be made: %s", err)
        return False
    logger.info("made the schedule %s: overnight reap every hour", REAP_SCHEDULE_ID)
    return True


def _line(entry: ReapedSandbox) -> str:
    if entry.kind == "released":
        return released_line(entry)
    done = "deleted" if entry.stopped else f"not deleted ({entry.detail})"
    return (
        f"{entry.provider} {entry.kind} {entry.sandbox_id} of {entry.run_id}: {done}: {entry.why}"
    )
