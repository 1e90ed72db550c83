"""Tick lag: how long after a virtual agent's checkpoint changed the workflow recorded it.

For each checkpoint version that appeared in a window (`AgentSchedule` says exactly when),
the lag runs until the workflow task that received the observation carrying it (or a later
version, for a supervisor that skipped one) started: that is when the workflow code saw it.
It splits into `watch` (change -> the activity that saw it completed; overnight's long poll
looks once a second, the baseline once per `poll_seconds`) and `deliver` (activity completed
-> workflow task started: server and worker scheduling).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from bench.fake_provider import AgentSchedule, version_of
from bench.timeline import activities, next_workflow_task_start
from overnight.constants import WORKFLOW_TYPE

FETCH_CONCURRENCY = 20


@dataclass(frozen=True)
class Seen:
    activity_closed_at: float
    workflow_saw_at: float


@dataclass
class Lags:
    total: list[float] = field(default_factory=list)
    watch: list[float] = field(default_factory=list)
    deliver: list[float] = field(default_factory=list)
    # Versions that changed in the window and were not recorded when the histories were read.
    missed: int = 0

    def extend(self, other: Lags) -> None:
        self.total += other.total
        self.watch += other.watch
        self.deliver += other.deliver
        self.missed += other.missed


async def tick_lags(
    client: Client,
    system: str,
    run_ids: list[str],
    schedules: dict[str, AgentSchedule],
    window: tuple[float, float],
) -> Lags:
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
        return lags_of(schedule, recorded_versions(system, list(history.events)), window)

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
            recorded[version] = Seen(act.closed_at, saw)
    return recorded


def lags_of(
    schedule: AgentSchedule, recorded: dict[int, Seen], window: tuple[float, float]
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
        else:
            lags.missed += 1
        version += 1
    return lags
