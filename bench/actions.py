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
| activity heartbeats reaching the server   | 1 each: not in history, estimated below    |

Queries are billable too but are not part of a run's own cost (none are counted here).

Heartbeats: the SDK sends the first heartbeat at once and then at most one per throttle
interval, `min(0.8 x heartbeat_timeout, 60 s)` (temporalio's `max_heartbeat_throttle_interval`
default). overnight's long activities heartbeat every `min(5 s, heartbeat_timeout / 3)`
(`activities.heartbeat`), so an activity attempt of duration D sends the heartbeats
`heartbeats_sent` simulates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

SDK_MAX_THROTTLE_SECONDS = 60.0
HEARTBEAT_CALL_SECONDS = 5.0
# Activities whose code heartbeats all the time it runs (activities.heartbeat.auto_heartbeat).
HEARTBEATING_ACTIVITIES = frozenset({"observe_agent", "create_sandbox"})

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


def heartbeats_sent(
    duration: float,
    heartbeat_timeout: float,
    *,
    call_every: float | None = None,
    max_throttle: float = SDK_MAX_THROTTLE_SECONDS,
) -> int:
    """Heartbeats reaching the server from one attempt of `duration` s that heartbeats every
    `call_every` s from its start: the first at once, later ones at most once per throttle
    window, a held one sent when its window ends."""
    every = call_every or min(HEARTBEAT_CALL_SECONDS, heartbeat_timeout / 3)
    throttle = min(0.8 * heartbeat_timeout, max_throttle)
    sent, window_end, pending = 1, throttle, False
    call = every
    while call < duration:
        while pending and window_end <= call:
            sent, window_end, pending = sent + 1, window_end + throttle, False
        if call >= window_end:
            sent, window_end = sent + 1, call + throttle
        else:
            pending = True
        call += every
    if pending and window_end <= duration:
        sent += 1
    return sent


@dataclass
class HistoryCost:
    runs: int = 0
    events: int = 0
    max_events_in_a_run: int = 0
    history_bytes: int = 0
    actions: dict[str, int] = field(default_factory=dict)
    activity_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def actions_in_history(self) -> int:
        return sum(n for kind, n in self.actions.items() if kind != "heartbeat (est.)")

    @property
    def total_actions(self) -> int:
        return sum(self.actions.values())

    def add(self, kind: str, count: int = 1) -> None:
        self.actions[kind] = self.actions.get(kind, 0) + count


def count_history(
    runs: Iterable[list[HistoryEvent]], *, heartbeat_timeout_override: float | None = None
) -> HistoryCost:
    """Events and actions of all runs of one workflow's continue-as-new chain."""
    cost = HistoryCost()
    for events in runs:
        cost.runs += 1
        cost.events += len(events)
        cost.max_events_in_a_run = max(cost.max_events_in_a_run, len(events))
        cost.history_bytes += sum(event.ByteSize() for event in events)
        _count_run(events, cost, heartbeat_timeout_override)
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
                cost.add("heartbeat (est.)", heartbeats_sent(seconds, timeout))


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
