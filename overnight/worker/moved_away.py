"""A host's worker, back after its runs moved away, stops their old agents before it serves.

A host taken as lost (its queue had no poller for `OVERNIGHT_HOST_LOST_SECONDS`) had its runs
restarted on other hosts from their checkpoints, but its own sandboxes never heard: their
agents may still run (the worker died, not the machine). Before the returning worker polls its
host queue, every running local sandbox here is checked against its run: a sandbox of an
attempt older than its open run's current one (the run's `status` query: its `attempt` label
is lower; a create in flight has the current number) is paused (nothing in it runs; kept for a
look, labelled for `overnight reap` like a failed attempt's). A sandbox whose run has closed is
`overnight reap`'s, as on one host. One describe and at most one query per running sandbox,
once per worker start.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from activities.providers.protocol import LetsGo
from overnight.core import retention
from overnight.core.constants import LABEL_ATTEMPT, LABEL_KEEP_UNTIL, LABEL_RUN
from overnight.core.models import RunSpec, RunStatus

if TYPE_CHECKING:
    from activities.providers.protocol import SandboxProvider

logger = logging.getLogger(__name__)

# A run asked whether a sandbox is still its own answers within this, or the sandbox is left
# as it is (its run, if it moved, finds it paused or stops it itself).
QUERY_TIMEOUT = timedelta(seconds=10)
KEEP_DAYS = RunSpec.model_fields["keep_failed_days"].default


@dataclass(frozen=True)
class Verdict:
    sandbox_id: str
    run_id: str
    why: str | None  # None: still its run's own, left running


async def stop_moved_away(
    client: Client, provider: SandboxProvider | None, own_queue: str
) -> list[Verdict]:
    """Pause this host's running sandboxes whose runs have moved on; what was found."""
    if provider is None:
        return []
    try:
        boxes = await provider.list({}, include_stopped=False)
    except Exception as err:  # a host that cannot list its sandboxes still serves its runs
        logger.warning("could not list this host's sandboxes before serving: %s", err)
        return []
    running = [b for b in boxes if b.state == "running" and LABEL_RUN in b.labels]
    verdicts = await asyncio.gather(
        *(_verdict(client, b.sandbox_id, b.labels[LABEL_RUN], _attempt(b.labels)) for b in running)
    )
    for verdict in verdicts:
        if verdict.why is None:
            continue
        try:
            await provider.pause(verdict.sandbox_id)
            until = retention.keep_until(datetime.now(UTC), KEEP_DAYS)
            label = {LABEL_KEEP_UNTIL: retention.label_value(until)}
            await provider.set_labels(verdict.sandbox_id, label)
            if isinstance(provider, LetsGo):
                await provider.let_go(verdict.sandbox_id)  # its run moved on: nothing wakes it
            logger.warning(
                "paused sandbox %s on %s before serving: %s",
                verdict.sandbox_id,
                own_queue,
                verdict.why,
            )
        except Exception as err:
            logger.warning("could not pause sandbox %s: %s", verdict.sandbox_id, err)
    return list(verdicts)


def _attempt(labels: dict[str, str]) -> int | None:
    try:
        return int(labels.get(LABEL_ATTEMPT, ""))
    except ValueError:
        return None


async def _verdict(client: Client, sandbox_id: str, run_id: str, attempt: int | None) -> Verdict:
    handle = client.get_workflow_handle(run_id)
    try:
        described = await handle.describe()
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            logger.warning("could not describe run %s: %s", run_id, err)
        # Not found: another namespace's run, or one whose history is gone: reap's to judge.
        return Verdict(sandbox_id, run_id, None)
    if described.status != WorkflowExecutionStatus.RUNNING:
        return Verdict(sandbox_id, run_id, None)  # reap stops a closed run's leftovers
    try:
        status = await asyncio.wait_for(
            handle.query("status", result_type=RunStatus), QUERY_TIMEOUT.total_seconds()
        )
    except Exception as err:
        logger.warning("could not ask run %s for its sandbox: %s", run_id, err)
        return Verdict(sandbox_id, run_id, None)
    if attempt is None or status.sandbox_id == sandbox_id or attempt >= status.attempt:
        return Verdict(sandbox_id, run_id, None)
    now = status.sandbox_id or f"attempt {status.attempt}'s"
    return Verdict(sandbox_id, run_id, f"its run {run_id} moved on (to sandbox {now})")
