"""Mocked sandbox activities for the history-cost benchmark, registered by name like the real ones.

They stand for one healthy agent on the time-skipping server: it writes a checkpoint every
`checkpoint_every` seconds of workflow time and exits 0 after `hours`. The activities behave
like the real ones in workflow time, which is what shapes a history:

- `observe_agent` is a real long poll: it returns when the checkpoint changes, the agent exits
  or `wait_seconds` pass, whichever is first. It moves the server's clock itself (`env.sleep`),
  and heartbeats on the real activity's schedule in that clock: none at its start, then one
  per `activities.heartbeat.heartbeat_interval()` of its heartbeat timeout (the server times
  the attempt out if that is too rare). The benchmark counts the heartbeat requests the worker
  really sent (`heartbeats` here counts the calls).
- the baseline's `read_checkpoint` returns the whole file each time, `naive_get_process`
  says `running` until the agent exits.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from temporalio import activity
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.heartbeat import heartbeat_interval
from activities.models import (
    ActivityName,
    AgentStarted,
    CheckpointRead,
    CreateSandboxInput,
    ListSandboxesInput,
    Observation,
    ObserveInput,
    ReadCheckpointInput,
    SandboxInfo,
    SandboxList,
    SandboxRef,
    SearchAttributeCheck,
    SearchAttributeCheckInput,
    SpecCheck,
    SpecCheckInput,
)
from activities.notify.models import Notification, SendResult
from bench.baseline import GET_PROCESS, ProcessRef, ProcessSeen
from overnight.core.constants import SEARCH_ATTRIBUTE_TYPES

# Notes kept in the checkpoint, so it grows to a realistic size and then stays there.
NOTES_KEPT = 20
# Failed clock moves borne in one wait before the mock gives up (and its activity retries).
SLEEP_FAILURES_BORNE = 5


def checkpoint_read(text: str) -> CheckpointRead:
    data = text.encode()
    return CheckpointRead(
        status="ok", digest=hashlib.sha256(data).hexdigest(), size=len(data), text=text
    )


class HealthyAgentWorld:
    """One agent, seen through mocked activities, in the time-skipping server's clock."""

    def __init__(self, env: WorkflowEnvironment, *, hours: float, checkpoint_every: float):
        self._env = env
        self._run_for = timedelta(hours=hours)
        self._every = timedelta(seconds=checkpoint_every)
        self._started: datetime | None = None
        # Heartbeat calls the observe mock made (each one request: the worker does not throttle).
        self.heartbeats = 0

    def activities(self) -> list[Callable[..., Any]]:
        return [
            self.check_search_attributes,
            self.check_spec,
            self.create_sandbox,
            self.observe_agent,
            self.read_checkpoint,
            self.pause_sandbox,
            self.stop_sandbox,
            self.list_sandboxes,
            self.get_process,
            self.send_notification,
        ]

    # ----- the agent, as a function of workflow time -----

    def _version(self, now: datetime) -> int:
        assert self._started is not None
        return int((min(now, self._end()) - self._started) / self._every)

    def _end(self) -> datetime:
        assert self._started is not None
        return self._started + self._run_for

    def _next_change(self, now: datetime) -> datetime:
        assert self._started is not None
        return self._started + (self._version(now) + 1) * self._every

    def _text(self, version: int) -> str:
        notes = [f"step {n}: changed some files and ran the tests" for n in range(1, version + 1)]
        return json.dumps(
            {"step": version, "next": f"step {version + 1}", "notes": notes[-NOTES_KEPT:]}
        )

    def _read(self, now: datetime, known_digest: str | None) -> CheckpointRead:
        version = self._version(now)
        if version == 0:
            return CheckpointRead(status="missing")
        read = checkpoint_read(self._text(version))
        if read.digest == known_digest:
            return CheckpointRead(status="unchanged", digest=read.digest, size=read.size)
        return read

    async def _now(self) -> datetime:
        return await self._env.get_current_time()

    async def _pass_time(self, until: datetime, last_beat: datetime) -> datetime:
        """Move the clock to `until`, heartbeating as the real observe does (one per heartbeat
        interval since the last, `last_beat`); the time of the last heartbeat (or start)."""
        interval = heartbeat_interval()
        every = timedelta(seconds=interval) if interval is not None else None
        now = await self._now()
        failures = 0
        while now < until:
            beat_at = last_beat + every if every is not None else None
            step_to = until if beat_at is None else min(until, beat_at)
            try:
                await self._env.sleep(step_to - now)
            except RPCError:
                # On a loaded machine the test server can time out a sleep's request ("Timeout
                # expired", seen in CI); the clock may or may not have moved: read it, go on.
                failures += 1
                if failures > SLEEP_FAILURES_BORNE:
                    raise
            now = await self._now()
            if beat_at is not None and now >= beat_at:
                activity.heartbeat()
                self.heartbeats += 1
                last_beat = now
                await asyncio.sleep(0.002)  # let the heartbeat reach the server first
        return last_beat

    # ----- activities by name -----

    @activity.defn(name=ActivityName.CHECK_SEARCH_ATTRIBUTES)
    async def check_search_attributes(self, _: SearchAttributeCheckInput) -> SearchAttributeCheck:
        return SearchAttributeCheck(present=list(SEARCH_ATTRIBUTE_TYPES))

    @activity.defn(name=ActivityName.CHECK_SPEC)
    async def check_spec(self, _: SpecCheckInput) -> SpecCheck:
        # The worker grants what the spec asks for; its agents are virtual: no work to push.
        return SpecCheck(holds_work=False)

    @activity.defn(name=ActivityName.CREATE_SANDBOX)
    async def create_sandbox(self, request: CreateSandboxInput) -> AgentStarted:
        if self._started is None:
            self._started = await self._now()
        name = f"{request.spec.run_id}-{request.attempt}"
        return AgentStarted(sandbox_id=name, process_id=f"{name}-0")

    @activity.defn(name=ActivityName.OBSERVE_AGENT)
    async def observe_agent(self, request: ObserveInput) -> Observation:
        now = await self._now()
        give_up = now + timedelta(seconds=request.wait_seconds)
        last_beat = now
        while True:
            read = self._read(now, request.known_digest)
            news = read if read.status == "ok" else None
            if now >= self._end():
                return Observation(
                    process_state="exited", exit_code=0, sandbox_state="running", checkpoint=news
                )
            if news is not None:
                return Observation(
                    process_state="running", sandbox_state="running", checkpoint=news
                )
            if now >= give_up:
                return Observation(process_state="running", sandbox_state="running")
            until = min(give_up, self._end(), self._next_change(now))
            last_beat = await self._pass_time(until, last_beat)
            now = await self._now()

    @activity.defn(name=ActivityName.READ_CHECKPOINT)
    async def read_checkpoint(self, request: ReadCheckpointInput) -> CheckpointRead:
        return self._read(await self._now(), request.known_digest)

    @activity.defn(name=GET_PROCESS)
    async def get_process(self, _: ProcessRef) -> ProcessSeen:
        if await self._now() >= self._end():
            return ProcessSeen(state="exited", exit_code=0)
        return ProcessSeen(state="running")

    @activity.defn(name=ActivityName.PAUSE_SANDBOX)
    async def pause_sandbox(self, ref: SandboxRef) -> SandboxInfo:
        return SandboxInfo(sandbox_id=ref.sandbox_id, state="paused")

    @activity.defn(name=ActivityName.STOP_SANDBOX)
    async def stop_sandbox(self, ref: SandboxRef) -> SandboxInfo:
        return SandboxInfo(sandbox_id=ref.sandbox_id, state="stopped")

    @activity.defn(name=ActivityName.LIST_SANDBOXES)
    async def list_sandboxes(self, _: ListSandboxesInput) -> SandboxList:
        return SandboxList()

    @activity.defn(name=ActivityName.SEND_NOTIFICATION)
    async def send_notification(self, _: Notification) -> SendResult:
        # No targets in the benchmark's runs: nothing to send, nothing left for a retry.
        return SendResult()
