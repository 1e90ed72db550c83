"""Nightly (or every-N-hours) runs on Temporal Schedules: no cron of overnight's own.

A schedule's action starts an `AgentRun` whose workflow id is the schedule's name plus the
firing time (Temporal adds it); the spec leaves `run_id` out, so each firing takes its run id
from that workflow id. The default overlap is `skip`: while last night's run is still going,
tonight's is skipped (and `describe` counts it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.service import RPCError, RPCStatusCode

from overnight.cli.client import task_priority
from overnight.cli.spec_size import too_large
from overnight.core.codec import encrypts
from overnight.core.constants import TASK_QUEUE, WORKFLOW_TYPE
from overnight.core.errors import OvernightError, SpecError
from overnight.core.models import RunSpec
from overnight.core.specs import run_summary

Overlap = Literal["skip", "buffer-one", "cancel-other"]
OVERLAPS: dict[str, ScheduleOverlapPolicy] = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "buffer-one": ScheduleOverlapPolicy.BUFFER_ONE,
    "cancel-other": ScheduleOverlapPolicy.CANCEL_OTHER,
}
_EVERY = re.compile(r"^(\d+)([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
# The server keeps a cron as calendar entries: the words it was given live in the memo.
WHEN_MEMO = "overnight_when"


class ScheduleNotFound(OvernightError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no schedule {name!r} in this namespace")


class ScheduleExists(OvernightError):
    bad_input = True


class ScheduleInfo(BaseModel):
    """What `schedule list` and `schedule describe` show of one schedule."""

    model_config = ConfigDict(extra="forbid")

    name: str
    when: str
    timezone: str | None = None
    overlap: str = "skip"
    paused: bool = False
    note: str | None = None
    next_runs: list[datetime] = []
    recent_runs: list[str] = []
    running: list[str] = []
    fired: int = 0
    skipped_for_overlap: int = 0


@dataclass(frozen=True)
class When:
    cron: str | None = None
    every: timedelta | None = None

    def text(self) -> str:
        return f"cron {self.cron}" if self.cron is not None else f"every {_duration(self.every)}"

    def spec(self, timezone: str | None) -> ScheduleSpec:
        if self.cron is not None:
            return ScheduleSpec(cron_expressions=[self.cron], time_zone_name=timezone)
        assert self.every is not None
        return ScheduleSpec(
            intervals=[ScheduleIntervalSpec(every=self.every)], time_zone_name=timezone
        )


def parse_every(text: str) -> timedelta:
    """`90s`, `30m`, `6h`, `1d`."""
    found = _EVERY.match(text.strip())
    if found is None or int(found.group(1)) == 0:
        raise SpecError(f"--every {text!r}: give a positive number and a unit, like 30m, 6h, 1d")
    return timedelta(seconds=int(found.group(1)) * _UNIT_SECONDS[found.group(2)])


def scheduled_spec(spec: RunSpec) -> RunSpec:
    """The spec a schedule starts: its run id must come from each firing's workflow id."""
    if spec.run_id:
        raise SpecError(
            "spec: field run_id: leave it out of a scheduled spec (each firing takes its own "
            "from its workflow id)"
        )
    if (problem := too_large(spec)) is not None:
        raise SpecError(problem)
    return spec


async def create_schedule(
    client: Client,
    name: str,
    spec: RunSpec,
    when: When,
    *,
    overlap: Overlap = "skip",
    timezone: str | None = None,
    task_queue: str = TASK_QUEUE,
) -> ScheduleHandle:
    if not NAME.match(name):
        raise SpecError(f"schedule name {name!r}: letters, digits, '.', '_' and '-' only")
    action = ScheduleActionStartWorkflow(
        WORKFLOW_TYPE,
        scheduled_spec(spec),
        id=name,
        task_queue=task_queue,
        priority=task_priority(spec),
        static_summary=run_summary(spec).replace("overnight run ", f"overnight schedule {name}"),
    )
    schedule = Schedule(
        action=action,
        spec=when.spec(timezone),
        policy=SchedulePolicy(overlap=OVERLAPS[overlap]),
        # The note is no payload: with encryption on it must not show the spec's command.
        state=ScheduleState(
            note="created by overnight"
            + ("" if encrypts(client.data_converter) else f": {_what_runs(spec)[:80]}")
        ),
    )
    try:
        return await client.create_schedule(name, schedule, memo={WHEN_MEMO: when.text()})
    except ScheduleAlreadyRunningError:
        raise ScheduleExists(f"schedule {name!r} already exists") from None


def _what_runs(spec: RunSpec) -> str:
    """The command, or the coding agent and its prompt (`agent`)."""
    return spec.command if spec.agent is None else f"{spec.agent.kind}: {spec.agent.prompt}"


async def describe_schedule(client: Client, name: str) -> ScheduleInfo:
    try:
        found = await client.get_schedule_handle(name).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise ScheduleNotFound(name) from None
        raise
    spec, info, state = found.schedule.spec, found.info, found.schedule.state
    policy = found.schedule.policy.overlap
    return ScheduleInfo(
        name=name,
        when=str(await found.memo_value(WHEN_MEMO, default=_when_text(spec))),
        timezone=spec.time_zone_name,
        overlap=next((k for k, v in OVERLAPS.items() if v == policy), str(policy)),
        paused=state.paused,
        note=state.note,
        next_runs=list(info.next_action_times[:3]),
        recent_runs=[
            a.action.workflow_id
            for a in info.recent_actions[-5:]
            if isinstance(a.action, ScheduleActionExecutionStartWorkflow)
        ],
        running=[
            r.workflow_id
            for r in info.running_actions
            if isinstance(r, ScheduleActionExecutionStartWorkflow)
        ],
        fired=info.num_actions,
        skipped_for_overlap=info.num_actions_skipped_overlap,
    )


async def list_schedules(client: Client) -> list[ScheduleInfo]:
    names = [entry.id async for entry in await client.list_schedules()]
    return [await describe_schedule(client, name) for name in sorted(names)]


async def pause_schedule(client: Client, name: str, *, paused: bool, note: str | None) -> None:
    handle = await _existing(client, name)
    if paused:
        await handle.pause(note=note or "paused with overnight")
    else:
        await handle.unpause(note=note or "unpaused with overnight")


async def trigger_schedule(client: Client, name: str) -> None:
    """Fire now, under the schedule's own overlap policy."""
    await (await _existing(client, name)).trigger()


async def delete_schedule(client: Client, name: str) -> None:
    """Delete the schedule; runs it started go on (cancel those on their own)."""
    await (await _existing(client, name)).delete()


async def _existing(client: Client, name: str) -> ScheduleHandle:
    await describe_schedule(client, name)  # a clear "no schedule" before acting
    return client.get_schedule_handle(name)


def _when_text(spec: ScheduleSpec) -> str:
    parts = [f"cron {c}" for c in spec.cron_expressions]
    parts += [f"every {_duration(i.every)}" for i in spec.intervals]
    for calendar in spec.calendars:
        parts.append(f"calendar {calendar}")
    return ", ".join(parts) or "-"


def _duration(every: timedelta | None) -> str:
    if every is None:
        return "-"
    seconds = int(every.total_seconds())
    for unit in ("d", "h", "m"):
        size = _UNIT_SECONDS[unit]
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
