"""Reading what happened, and when, out of a workflow's history (server timestamps)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent


@dataclass
class ActivityRun:
    """One activity of a history: its name, its times (Unix seconds) and its decoded result."""

    name: str
    scheduled_at: float
    started_at: float | None = None
    closed_at: float | None = None
    closed_event_id: int | None = None
    result: Any = None


def unix(moment: datetime) -> float:
    # Protobuf timestamps convert to naive UTC datetimes.
    return (moment - datetime(1970, 1, 1)).total_seconds()


def activities(events: list[HistoryEvent]) -> list[ActivityRun]:
    """Every activity in the order it was scheduled, with its result when it completed."""
    by_id: dict[int, ActivityRun] = {}
    for event in events:
        at = unix(event.event_time.ToDatetime())
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            by_id[event.event_id] = ActivityRun(name=name, scheduled_at=at)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            run = by_id.get(event.activity_task_started_event_attributes.scheduled_event_id)
            if run is not None:
                run.started_at = at
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs = event.activity_task_completed_event_attributes
            run = by_id.get(attrs.scheduled_event_id)
            if run is not None:
                run.closed_at, run.closed_event_id = at, event.event_id
                payloads = attrs.result.payloads
                run.result = json.loads(payloads[0].data) if payloads else None
    return list(by_id.values())


def next_workflow_task_start(events: list[HistoryEvent], after_event_id: int) -> float | None:
    """When the workflow next ran after event `after_event_id`: the moment it saw that event."""
    for event in events:
        if (
            event.event_id > after_event_id
            and event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
        ):
            return unix(event.event_time.ToDatetime())
    return None
