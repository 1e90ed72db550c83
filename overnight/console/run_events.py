"""What a run's history says happened that its status keeps no record of, as timeline marks
(overnight/console/timeline.py): each sandbox pause and wake with its reason (a question, a
wait, a person's attention, a lease end), each done check, and each cancel, extension,
answer and rewind a person sent.

Read from the history of the run's latest execution (a run that continued as new shows what
happened since), through the client's data converter, so an encrypted run's summaries and
arguments are decrypted here, in the console's process. Only the events named below are
decoded; at most `MAX_EVENTS` are read.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.service import RPCError

from activities.models import ActivityName
from overnight.console.timeline import Mark, MarkKind

MAX_EVENTS = 50_000
_SANDBOX_STEP = re.compile(r"^(pause|wake) sandbox \S+ \((.*)\)$", re.DOTALL)
_WATCHED_ACTIVITIES = {
    ActivityName.PAUSE_SANDBOX,
    ActivityName.WAKE_SANDBOX,
    ActivityName.RUN_DONE_CHECK,
}
_UPDATES: dict[str, MarkKind] = {"answer": "answer", "extend_budget": "extend", "rewind": "rewind"}
_SIGNALS: dict[str, MarkKind] = {"cancel": "cancel", "extend_budget": "extend"}


async def history_marks(client: Client, run_id: str) -> list[Mark]:
    """The run's marks, oldest first; none when its history cannot be read."""
    marks: list[Mark] = []
    handle = client.get_workflow_handle(run_id)
    read = 0
    try:
        async for event in handle.fetch_history_events(page_size=1000):
            read += 1
            if read > MAX_EVENTS:
                break
            mark = await _mark_of(client, event)
            if mark is not None:
                marks.append(mark)
    except RPCError:
        return marks
    return marks


async def _mark_of(client: Client, event: HistoryEvent) -> Mark | None:
    at = event.event_time.ToDatetime(tzinfo=UTC)
    kind = event.event_type
    if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        name = event.activity_task_scheduled_event_attributes.activity_type.name
        if name not in _WATCHED_ACTIVITIES or not event.user_metadata.HasField("summary"):
            return None
        summary = await _text(client, event.user_metadata.summary)
        return _activity_mark(at, name, summary)
    if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
        signal = event.workflow_execution_signaled_event_attributes
        found = _SIGNALS.get(signal.signal_name)
        if found is None:
            return None
        args = await _values(client, list(signal.input.payloads))
        return Mark(at, found, said(found, args))
    if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
        request = event.workflow_execution_update_accepted_event_attributes.accepted_request
        found = _UPDATES.get(request.input.name)
        if found is None:
            return None
        args = await _values(client, list(request.input.args.payloads))
        return Mark(at, found, said(found, args))
    return None


def _activity_mark(at: datetime, name: str, summary: str | None) -> Mark | None:
    if summary is None:
        return None
    if name == ActivityName.RUN_DONE_CHECK:
        return Mark(at, "done_check", summary)
    found = _SANDBOX_STEP.match(summary)
    if found is None:
        return None
    return Mark(at, "pause" if found.group(1) == "pause" else "wake", found.group(2))


def said(kind: MarkKind, args: list[Any]) -> str:
    """A person's act in a few words: a cancel's reason, what an extension adds, the answer,
    the checkpoint a rewind goes to."""
    first = args[0] if args else None
    if kind == "cancel":
        return first if isinstance(first, str) else ""
    if kind == "answer":
        return first if isinstance(first, str) else ""
    if kind == "rewind":
        return f"to checkpoint {first}" if isinstance(first, int) else ""
    if kind == "extend" and isinstance(first, dict):
        parts = []
        for key, unit in (
            ("hours", "h"),
            ("spend_usd", "USD"),
            ("restarts", "restarts"),
            ("wait_hours", "h of waiting"),
            ("done_checks", "done-check rounds"),
        ):
            value = first.get(key)
            if isinstance(value, int | float) and value:
                parts.append(f"+{value:g} {unit}")
        return ", ".join(parts)
    return ""


async def _text(client: Client, payload: Payload) -> str | None:
    values = await _values(client, [payload])
    return values[0] if values and isinstance(values[0], str) else None


async def _values(client: Client, payloads: list[Payload]) -> list[Any]:
    """The payloads as plain values (one a payload); [] when they cannot be read (a key this
    console lacks, a shape it does not know)."""
    if not payloads:
        return []
    try:
        return list(await client.data_converter.decode(payloads, [Any] * len(payloads)))
    except Exception:  # agent- or client-made payloads: one that cannot be read is left out
        return []
