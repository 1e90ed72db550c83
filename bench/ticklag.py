"""Tick lag: how long after a virtual agent's checkpoint changed the workflow recorded it.

For each checkpoint version that appeared in a window (`AgentSchedule` says exactly when),
the lag runs until the workflow task that received the observation carrying it (or a later
version, for a supervisor that skipped one) started: that is when the workflow code saw it.
It splits into `watch` (change -> the activity that saw it completed; overnight's long poll
looks once a second, the baseline once per `poll_seconds`) and `deliver` (activity completed
-> workflow task started: server and worker scheduling).

overnight's observe holds a changed checkpoint until `report_every` seconds (the run's
`poll_seconds`) after the observe began, by design: one activity and a few history events per
poll, not per write. So its lag is also measured past due (`late`): from the moment the news
was due, the change or that point of the observe that carried it, whichever is later, to the
workflow task that saw it. That is what load adds; the cadence is the run's own choice.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.service import RPCError

from bench.timeline import activities, next_workflow_task_start, unix
from fakes.provider import AgentSchedule, version_of
from overnight.core.constants import WORKFLOW_TYPE

FETCH_CONCURRENCY = 20


@dataclass(frozen=True)
class Seen:
    activity_closed_at: float
    workflow_saw_at: float
    # When the observe that carried it began (None: not an observe, or not recorded).
    activity_started_at: float | None = None


@dataclass
class Lags:
    total: list[float] = field(default_factory=list)
    watch: list[float] = field(default_factory=list)
    deliver: list[float] = field(default_factory=list)
    late: list[float] = field(default_factory=list)
    # Versions that changed in the window and were not recorded when the histories were read.
    missed: int = 0
    # What the sampled runs wrote in the window: history events by kind, and how many runs.
    events: dict[str, int] = field(default_factory=dict)
    runs: int = 0

    def extend(self, other: Lags) -> None:
        self.total += other.total
        self.watch += other.watch
        self.deliver += other.deliver
        self.late += other.late
        self.missed += other.missed
        for kind, count in other.events.items():
            self.events[kind] = self.events.get(kind, 0) + count
        self.runs += other.runs


async def tick_lags(
    client: Client,
    system: str,
    run_ids: list[str],
    schedules: dict[str, AgentSchedule],
    window: tuple[float, float],
    report_every: float | None = None,
) -> Lags:
    """`report_every`: how long overnight's observe holds checkpoint news (None: at once)."""
    gate = asyncio.Semaphore(FETCH_CONCURRENCY)

    async def one(run_id: str) -> Lags:
        schedule = schedules.get(f"{run_id}-1")
        if schedule is None:
            return Lags()
        async with gate:
            try:
                history = await client.get_workflow_handle(run_id).fetch_history()
            except RPCError:
                return Lags()
        events = list(history.events)
        lags = lags_of(schedule, recorded_versions(system, events), window, report_every)
        lags.events, lags.runs = events_in(events, window), 1
        return lags

    found = Lags()
    for lags in await asyncio.gather(*(one(run_id) for run_id in run_ids)):
        found.extend(lags)
    return found


def recorded_versions(system: str, events: list[Any]) -> dict[int, Seen]:
    """Checkpoint version -> when its activity completed and when the workflow first saw it."""
    name = "observe_agent" if system == WORKFLOW_TYPE else "read_checkpoint"
    recorded: dict[int, Seen] = {}
    for act in activities(events):
        if act.name != name or not isinstance(act.result, dict) or act.closed_event_id is None:
            continue
        read = act.result.get("checkpoint") if system == WORKFLOW_TYPE else act.result
        if not isinstance(read, dict) or read.get("status") != "ok" or act.closed_at is None:
            continue
        version = version_of(str(read.get("text")))
        saw = next_workflow_task_start(events, act.closed_event_id)
        if version is not None and saw is not None and version not in recorded:
            recorded[version] = Seen(act.closed_at, saw, act.started_at)
    return recorded


def lags_of(
    schedule: AgentSchedule,
    recorded: dict[int, Seen],
    window: tuple[float, float],
    report_every: float | None = None,
) -> Lags:
    start, end = window
    lags = Lags()
    version = max(1, schedule.version_at(start) + 1)
    while schedule.changed_at(version) <= end:
        changed = schedule.changed_at(version)
        later = [seen for number, seen in recorded.items() if number >= version]
        if later:
            first = min(later, key=lambda seen: seen.workflow_saw_at)
            lags.total.append(first.workflow_saw_at - changed)
            lags.watch.append(first.activity_closed_at - changed)
            lags.deliver.append(first.workflow_saw_at - first.activity_closed_at)
            lags.late.append(first.workflow_saw_at - due_at(changed, first, report_every))
        else:
            lags.missed += 1
        version += 1
    return lags


def due_at(changed: float, seen: Seen, report_every: float | None) -> float:
    """When the news of a change made at `changed` was due: at once, or, if the observe that
    carried it ran to its report point, at that point when it came after the change."""
    if report_every is None or seen.activity_started_at is None:
        return changed
    report_at = seen.activity_started_at + report_every
    if seen.activity_closed_at < report_at:
        return changed  # it came back before its report point: nothing was held
    return max(changed, report_at)


# History events that say where a run's cost goes, by short name.
_KINDS = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED: "workflow_tasks",
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activities",
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: "upserts",
    EventType.EVENT_TYPE_TIMER_STARTED: "timers",
    EventType.EVENT_TYPE_MARKER_RECORDED: "markers",
}


def events_in(events: list[Any], window: tuple[float, float]) -> dict[str, int]:
    """How many events of each kind in `_KINDS` (and in all) fall in `window`."""
    start, end = window
    counts: dict[str, int] = {"events": 0}
    for event in events:
        if not start <= unix(event.event_time.ToDatetime()) < end:
            continue
        counts["events"] += 1
        kind = _KINDS.get(event.event_type)
        if kind is not None:
            counts[kind] = counts.get(kind, 0) + 1
    return counts
