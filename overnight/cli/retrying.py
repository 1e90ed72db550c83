"""What a run is retrying right now, for `overnight status`: its activities that failed and wait
for their next attempt, with why (a worker low on disk refusing new sandboxes, a provider
down). The run's own status cannot say it: an activity's retries are the server's, not the
workflow's, until they run out."""

from __future__ import annotations

from datetime import datetime

from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import Client

from overnight.cli.render import terminal_safe

# A failure message is an error's first line, as long as a status line may be.
MESSAGE_CHARS = 300


async def retrying_lines(client: Client, run_id: str, now: datetime) -> list[str]:
    """One line per activity of the run retried after a failure; [] when none is (or the
    server cannot tell)."""
    try:
        described = await client.get_workflow_handle(run_id).describe()
    except Exception:  # noqa: BLE001 - best effort: the status itself was read
        return []
    return [
        line
        for pending in described.raw_description.pending_activities
        if (line := retrying_line(pending, now)) is not None
    ]


def retrying_line(pending: PendingActivityInfo, now: datetime) -> str | None:
    if pending.attempt <= 1 or not pending.last_failure.message:
        return None
    message = terminal_safe(pending.last_failure.message.splitlines()[0])[:MESSAGE_CHARS]
    when = ""
    if pending.HasField("next_attempt_schedule_time"):
        wait = (pending.next_attempt_schedule_time.ToDatetime(now.tzinfo) - now).total_seconds()
        when = f", next in {max(0, round(wait))} s"
    name = pending.activity_type.name.replace("_", " ")
    return f"retrying {name} (attempt {pending.attempt}{when}): {message}"
