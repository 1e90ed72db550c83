"""A `SandboxProvider` whose agents cost nothing: the scale benchmark's sandboxes.

Each agent is virtual: started at `started_at`, it "writes" checkpoint version 1 at
`started_at + first`, then a new version every `interval` seconds, forever. Nothing runs;
a read computes the current version from the clock. Every agent start is appended to a JSONL
log (`AgentLog`), so the benchmark driver, in another process, knows exactly when each
version appeared and can measure how late the workflow recorded it.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from activities.models import SandboxInfo
from activities.providers.polling_watch import Look, poll_watch
from activities.providers.protocol import (
    AgentLaunch,
    CommandOutput,
    FileRead,
    ProcessInfo,
    SandboxNotFound,
    SandboxNotRunning,
    SandboxRequest,
    Sighting,
)


@dataclass(frozen=True)
class AgentSchedule:
    """When a virtual agent's checkpoint versions appear (Unix seconds)."""

    sandbox_id: str
    started_at: float
    first: float
    interval: float

    def version_at(self, now: float) -> int:
        if now < self.started_at + self.first:
            return 0
        return 1 + int((now - self.started_at - self.first) // self.interval)

    def changed_at(self, version: int) -> float:
        return self.started_at + self.first + (version - 1) * self.interval


def checkpoint_text(sandbox_id: str, version: int) -> str:
    """What a virtual agent's checkpoint holds at `version`: JSON like the sample agent's."""
    return json.dumps(
        {"step": version, "next": f"step {version + 1}", "notes": [f"{sandbox_id} v{version}"]}
    )


def version_of(text: str) -> int | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    step = value.get("step") if isinstance(value, dict) else None
    return step if isinstance(step, int) else None


def read_schedules(path: Path) -> dict[str, AgentSchedule]:
    """The log written by `FakeProvider`: the schedule of every agent started, by sandbox."""
    schedules: dict[str, AgentSchedule] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                entry = AgentSchedule(**json.loads(line))
                schedules[entry.sandbox_id] = entry
    return schedules


@dataclass
class _Box:
    info: SandboxInfo
    agent: AgentSchedule | None = None
    process_id: str | None = None


class FakeProvider:
    """In-memory sandboxes with virtual agents checkpointing every `interval` seconds."""

    def __init__(
        self,
        *,
        interval: tuple[float, float] = (30.0, 60.0),
        log_path: Path | None = None,
        seed: int = 0,
    ) -> None:
        self._interval = interval
        self._log_path = log_path
        self._random = random.Random(seed)
        self._boxes: dict[str, _Box] = {}

    # ----- sandboxes -----

    async def get_or_create(self, request: SandboxRequest) -> tuple[SandboxInfo, bool]:
        box = self._boxes.get(request.name)
        if box is not None:
            return box.info, False
        info = SandboxInfo(
            sandbox_id=request.name,
            name=request.name,
            state="running",
            labels=dict(request.labels),
            created_at=datetime.now(UTC),
        )
        self._boxes[request.name] = _Box(info)
        return info, True

    async def sandbox(self, sandbox_id: str) -> SandboxInfo:
        box = self._boxes.get(sandbox_id)
        if box is None:
            return SandboxInfo(sandbox_id=sandbox_id, name=sandbox_id, state="missing")
        return box.info

    async def list(self, labels: dict[str, str], *, include_stopped: bool) -> list[SandboxInfo]:
        return [
            box.info
            for box in self._boxes.values()
            if (include_stopped or box.info.state != "stopped")
            and all(box.info.labels.get(k) == v for k, v in labels.items())
        ]

    async def pause(self, sandbox_id: str) -> SandboxInfo:
        return self._set_state(sandbox_id, "paused")

    async def stop(self, sandbox_id: str) -> SandboxInfo:
        return self._set_state(sandbox_id, "stopped")

    async def extend(self, sandbox_id: str, seconds: float) -> SandboxInfo:
        return self._box(sandbox_id).info

    async def set_labels(self, sandbox_id: str, labels: dict[str, str]) -> SandboxInfo:
        box = self._box(sandbox_id)
        box.info = box.info.model_copy(update={"labels": {**box.info.labels, **labels}})
        return box.info

    async def aclose(self) -> None:
        """Nothing to close."""

    # ----- agents -----

    async def start_agent(self, sandbox_id: str, launch: AgentLaunch) -> ProcessInfo:
        box = self._running(sandbox_id)
        if box.process_id is None:
            interval = self._random.uniform(*self._interval)
            box.agent = AgentSchedule(
                sandbox_id=sandbox_id,
                started_at=time.time(),
                first=self._random.uniform(0, interval),
                interval=interval,
            )
            box.process_id = launch.start_key
            self._log(box.agent)
        return ProcessInfo(process_id=box.process_id, state="running")

    async def process(self, sandbox_id: str, process_id: str) -> ProcessInfo:
        box = self._boxes.get(sandbox_id)
        if box is None or box.process_id != process_id:
            return ProcessInfo(process_id=process_id, state="missing")
        if box.info.state == "stopped":
            return ProcessInfo(process_id=process_id, state="killed")
        return ProcessInfo(process_id=process_id, state="running")

    async def watch(
        self,
        sandbox_id: str,
        process_id: str,
        checkpoint_path: str,
        *,
        token: str | None,
        wait_seconds: float,
        report_touch: bool = True,
        requests_path: str | None = None,  # not kept: these agents write no requests
    ) -> Sighting:
        async def look() -> Look:
            box = self._boxes.get(sandbox_id)
            version = 0 if box is None or box.agent is None else box.agent.version_at(time.time())
            return Look(
                await self.sandbox(sandbox_id),
                await self.process(sandbox_id, process_id),
                f"v{version}",
            )

        return await poll_watch(
            look, token=token, wait_seconds=wait_seconds, interval=1.0, report_touch=report_touch
        )

    async def wake(self, sandbox_id: str) -> SandboxInfo:
        return self._set_state(sandbox_id, "running")

    # ----- commands and files -----

    async def run(
        self, sandbox_id: str, command: str, *, cwd: str | None = None, timeout_seconds: float = 600
    ) -> CommandOutput:
        self._running(sandbox_id)
        return CommandOutput(exit_code=0, stdout="", stderr="")

    async def read_file(
        self, sandbox_id: str, path: str, max_bytes: int, *, seen_running: bool = False
    ) -> FileRead:
        box = self._box(sandbox_id)
        version = 0 if box.agent is None else box.agent.version_at(time.time())
        if version == 0:
            return FileRead(status="missing")
        data = checkpoint_text(sandbox_id, version).encode()
        if len(data) > max_bytes:
            return FileRead(status="too_large", size=len(data))
        return FileRead(status="ok", size=len(data), data=data)

    async def write_file(self, sandbox_id: str, path: str, data: bytes) -> None:
        self._running(sandbox_id)

    async def upload_dir(self, sandbox_id: str, local_dir: str, remote_dir: str) -> None:
        self._running(sandbox_id)

    # ----- internals -----

    def _box(self, sandbox_id: str) -> _Box:
        box = self._boxes.get(sandbox_id)
        if box is None:
            raise SandboxNotFound(sandbox_id)
        return box

    def _running(self, sandbox_id: str) -> _Box:
        box = self._box(sandbox_id)
        if box.info.state != "running":
            raise SandboxNotRunning(sandbox_id, box.info.state)
        return box

    def _set_state(self, sandbox_id: str, state: str) -> SandboxInfo:
        box = self._box(sandbox_id)
        if box.info.state != "stopped":
            box.info = box.info.model_copy(update={"state": state})
        return box.info

    def _log(self, agent: AgentSchedule) -> None:
        if self._log_path is None:
            return
        with self._log_path.open("a") as out:
            out.write(json.dumps(asdict(agent)) + "\n")
