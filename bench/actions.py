"""Counting a workflow history's cost: events, and Temporal Cloud billable actions.

Actions follow Temporal Cloud's definitions (docs.temporal.io/cloud/actions):

| history                                   | actions                                    |
|-------------------------------------------|--------------------------------------------|
| WorkflowExecutionStarted (each run, so    | 1 (client start or continue-as-new)        |
| continue-as-new counts too)               |                                            |
| ActivityTaskScheduled                     | 1, plus 1 per retry (ActivityTaskStarted   |
|                                           | attempt - 1)                               |
| TimerStarted                              | 1 (includes wait_condition timeouts)       |
| UpsertWorkflowSearchAttributes            | 1                                          |
| WorkflowExecutionSignaled                 | 1                                          |
| WorkflowExecutionUpdateAccepted/Rejected  | 1                                          |
| MarkerRecorded (local activity, side      | 1                                          |
| effect)                                   |                                            |
| StartChildWorkflowExecutionInitiated      | 2                                          |
| activity heartbeats reaching the server   | 1 each: not in history; counted where the  |
|                                           | worker sent them, else estimated below     |

Queries are billable too but are not part of a run's own cost (none are counted here).

Heartbeats: overnight's long activities heartbeat only to stay inside their heartbeat timeout
(`activities.heartbeat`): none at the start, then one per `HEARTBEAT_SHARE` (0.8) x the
timeout, which is also the SDK's throttle window (`min(0.8 x timeout,
max_heartbeat_throttle_interval)`, the worker's set at or above it), so each one is sent when
made. The history benchmark counts the heartbeat requests its worker really sent
(`count_history(..., heartbeats=N)`); `heartbeats_sent` gives what an attempt of a given
length sends, as a cross-check and where nothing was counted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from activities.heartbeat import HEARTBEAT_SHARE

# Activities whose code heartbeats while it runs (activities.heartbeat.auto_heartbeat).
HEARTBEATING_ACTIVITIES = frozenset({"observe_agent", "create_sandbox"})
HEARTBEAT_SENT = "heartbeat (sent)"
HEARTBEAT_ESTIMATED = "heartbeat (est.)"

_ONE_ACTION = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: "workflow started",
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activity",
    EventType.EVENT_TYPE_TIMER_STARTED: "timer",
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: "search attribute upsert",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: "signal",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: "update",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_REJECTED: "update",
    EventType.EVENT_TYPE_MARKER_RECORDED: "marker",
}
_ACTIVITY_CLOSED = (
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED,
)


def heartbeats_sent(duration: float, heartbeat_timeout: float) -> int:
    """Heartbeats reaching the server from one attempt of `duration` s: one per
    `HEARTBEAT_SHARE` x `heartbeat_timeout` after its start (none at the start), each sent
    when made."""
    if heartbeat_timeout <= 0 or duration <= 0:
        return 0
    every = HEARTBEAT_SHARE * heartbeat_timeout
    return max(0, math.ceil(duration / every) - 1)


@dataclass
class HistoryCost:
    runs: int = 0
    events: int = 0
    max_events_in_a_run: int = 0
    history_bytes: int = 0
    actions: dict[str, int] = field(default_factory=dict)
    activity_seconds: dict[str, float] = field(default_factory=dict)
    # What `heartbeats_sent` makes of the activities' durations (with `heartbeats` counted).
    heartbeats_estimated: int = 0

    @property
    def actions_in_history(self) -> int:
        heartbeats = (HEARTBEAT_SENT, HEARTBEAT_ESTIMATED)
        return sum(n for kind, n in self.actions.items() if kind not in heartbeats)

    @property
    def total_actions(self) -> int:
        return sum(self.actions.values())

    def add(self, kind: str, count: int = 1) -> None:
        self.actions[kind] = self.actions.get(kind, 0) + count


def count_history(
    runs: Iterable[list[HistoryEvent]],
    *,
    heartbeats: int | None = None,
    heartbeat_timeout_override: float | None = None,
) -> HistoryCost:
    """Events and actions of all runs of one workflow's continue-as-new chain. `heartbeats`:
    the heartbeat requests its worker sent, when counted; else they are estimated."""
    cost = HistoryCost()
    for events in runs:
        cost.runs += 1
        cost.events += len(events)
        cost.max_events_in_a_run = max(cost.max_events_in_a_run, len(events))
        cost.history_bytes += sum(event.ByteSize() for event in events)
        _count_run(events, cost, heartbeat_timeout_override)
    if heartbeats is not None:
        cost.add(HEARTBEAT_SENT, heartbeats)
    elif cost.heartbeats_estimated:
        cost.add(HEARTBEAT_ESTIMATED, cost.heartbeats_estimated)
    return cost


def _count_run(
    events: list[HistoryEvent], cost: HistoryCost, heartbeat_timeout_override: float | None
) -> None:
    scheduled: dict[int, tuple[str, float]] = {}
    started: dict[int, datetime] = {}
    for event in events:
        kind = _ONE_ACTION.get(event.event_type)
        if kind is not None:
            cost.add(kind)
        if event.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            cost.add("child workflow", 2)
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            timeout = attrs.heartbeat_timeout.ToTimedelta().total_seconds()
            scheduled[event.event_id] = (attrs.activity_type.name, timeout)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs_started = event.activity_task_started_event_attributes
            started[attrs_started.scheduled_event_id] = event.event_time.ToDatetime()
            if attrs_started.attempt > 1:
                cost.add("activity retry", attrs_started.attempt - 1)
        elif event.event_type in _ACTIVITY_CLOSED:
            scheduled_id = _scheduled_id(event)
            if scheduled_id not in scheduled or scheduled_id not in started:
                continue
            name, timeout = scheduled[scheduled_id]
            seconds = (event.event_time.ToDatetime() - started[scheduled_id]).total_seconds()
            cost.activity_seconds[name] = cost.activity_seconds.get(name, 0.0) + seconds
            if heartbeat_timeout_override is not None and name == "observe_agent":
                timeout = heartbeat_timeout_override
            if timeout > 0 and name in HEARTBEATING_ACTIVITIES:
                cost.heartbeats_estimated += heartbeats_sent(seconds, timeout)


def _scheduled_id(event: HistoryEvent) -> int:
    for name in (
        "activity_task_completed_event_attributes",
        "activity_task_failed_event_attributes",
        "activity_task_timed_out_event_attributes",
        "activity_task_canceled_event_attributes",
    ):
        if event.HasField(name):
            return int(getattr(event, name).scheduled_event_id)
    return -1
