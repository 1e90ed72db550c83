"""`FakeProvider`: a `SandboxProvider` whose agents cost nothing, for the benchmarks of many
runs and the admission tests.

Nothing runs: an agent is a record with a start time, and what it does is computed from the
clock by its kind:

- `VirtualCheckpoints` (the scale benchmark): the agent "writes" checkpoint version 1 at
  `started_at + first`, then a new one every `interval` seconds, forever. Every start is
  appended to a JSONL log (`AgentSchedule`), so a driver in another process knows when each
  version appeared and can measure how late the workflow recorded it.
- `ShortLives` (the admission tests): the agent exits 0 `life` seconds after it started
  (`AGENT_SECONDS` in the spec's env), writing nothing.

Sandboxes live in memory, or (`state_dir`) one JSON file each, so several worker processes
(one killed with SIGKILL, the next taking over) see the same ones; the files' provider also
appends each sandbox coming up or going down to `events.jsonl` (`read_events`).
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

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
    WatchRequest,
)
from overnight.core.constants import LABEL_RUN

EVENTS = "events.jsonl"
Box = dict[str, Any]  # a sandbox's record: JSON, so the files' store can keep it


# --- the agents ---


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
    """The log `VirtualCheckpoints` writes: the schedule of every agent started, by sandbox."""
    schedules: dict[str, AgentSchedule] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                entry = AgentSchedule(**json.loads(line))
                schedules[entry.sandbox_id] = entry
    return schedules


class Agents(Protocol):
    """What a kind of fake agent does, computed from its record and the clock."""

    def start(self, box: Box, launch: AgentLaunch) -> None: ...

    def exited(self, box: Box, now: float) -> bool: ...

    def checkpoint(self, box: Box, now: float) -> str | None: ...

    def mark(self, box: Box, now: float) -> str:
        """What changes whenever the checkpoint does (a watch's token), cheaply."""
        ...


class VirtualCheckpoints:
    """Agents that never end and checkpoint every `interval` seconds (drawn from the range)."""

    def __init__(
        self,
        interval: tuple[float, float] = (30.0, 60.0),
        *,
        log_path: Path | None = None,
        seed: int = 0,
    ) -> None:
        self._interval = interval
        self._log_path = log_path
        self._random = random.Random(seed)

    def start(self, box: Box, launch: AgentLaunch) -> None:
        interval = self._random.uniform(*self._interval)
        schedule = AgentSchedule(
            sandbox_id=box["name"],
            started_at=time.time(),
            first=self._random.uniform(0, interval),
            interval=interval,
        )
        box["schedule"] = asdict(schedule)
        if self._log_path is not None:
            with self._log_path.open("a") as out:
                out.write(json.dumps(asdict(schedule)) + "\n")

    def exited(self, box: Box, now: float) -> bool:
        return False

    def checkpoint(self, box: Box, now: float) -> str | None:
        version = self._version(box, now)
        return None if version == 0 else checkpoint_text(box["name"], version)

    def mark(self, box: Box, now: float) -> str:
        return f"v{self._version(box, now)}"

    def _version(self, box: Box, now: float) -> int:
        schedule = box.get("schedule")
        return 0 if schedule is None else AgentSchedule(**schedule).version_at(now)


class ShortLives:
    """Agents that exit 0 `life` seconds after they start (`AGENT_SECONDS`), writing nothing."""

    def __init__(self, life: float = 0.2) -> None:
        self._life = life

    def start(self, box: Box, launch: AgentLaunch) -> None:
        box["agent_started"] = time.time()
        box["life"] = float(launch.env.get("AGENT_SECONDS", self._life))

    def exited(self, box: Box, now: float) -> bool:
        return bool(now >= box["agent_started"] + box["life"])

    def checkpoint(self, box: Box, now: float) -> str | None:
        return None

    def mark(self, box: Box, now: float) -> str:
        return "missing"


# --- where the sandboxes are kept ---


@dataclass(frozen=True)
class Event:
    at: float
    sandbox: str
    run_id: str
    up: bool


def read_events(state_dir: Path) -> list[Event]:
    path = state_dir / EVENTS
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return sorted((Event(**json.loads(line)) for line in lines if line.strip()), key=lambda e: e.at)


def most_at_once(events: list[Event]) -> int:
    """The most sandboxes up at the same time."""
    now = most = 0
    for event in events:
        now += 1 if event.up else -1
        most = max(most, now)
    return most


class _MemoryBoxes:
    def __init__(self) -> None:
        self._boxes: dict[str, Box] = {}

    def load(self, name: str) -> Box | None:
        return self._boxes.get(name)

    def save(self, box: Box) -> None:
        self._boxes[box["name"]] = box

    def all(self, run_id: str | None) -> list[Box]:
        return list(self._boxes.values())

    def went(self, box: Box, *, up: bool) -> None:
        """Nobody counts in-memory sandboxes coming and going."""


class _FileBoxes:
    """One JSON file a sandbox, written whole and renamed into place."""

    def __init__(self, folder: Path) -> None:
        self._dir = folder
        folder.mkdir(parents=True, exist_ok=True)

    def load(self, name: str) -> Box | None:
        try:
            loaded: Box = json.loads(self._path(name).read_text())
        except FileNotFoundError:
            return None
        return loaded

    def save(self, box: Box) -> None:
        path = self._path(box["name"])
        temp = path.with_suffix(f".{os.getpid()}.tmp")
        temp.write_text(json.dumps(box))
        temp.replace(path)

    def all(self, run_id: str | None) -> list[Box]:
        # A run's sandboxes are named `{run_id}-{attempt}`: read only theirs when asked.
        pattern = f"box-{run_id}-*.json" if run_id else "box-*.json"
        return [json.loads(path.read_text()) for path in sorted(self._dir.glob(pattern))]

    def went(self, box: Box, *, up: bool) -> None:
        run_id = box["labels"].get(LABEL_RUN, "")
        line = json.dumps({"at": time.time(), "sandbox": box["name"], "run_id": run_id, "up": up})
        with (self._dir / EVENTS).open("a") as out:
            out.write(line + "\n")

    def _path(self, name: str) -> Path:
        return self._dir / f"box-{name}.json"


# --- the provider ---


class FakeProvider:
    """Sandboxes of fake `agents`, in memory or (`state_dir`) in files; watched by polling
    every `look_every` seconds."""

    # Its agents are virtual: no clone, no work to push at a run's finish (check_spec says so).
    holds_no_work = True

    def __init__(
        self,
        agents: Agents,
        *,
        state_dir: Path | None = None,
        look_every: float = 1.0,
    ) -> None:
        self._agents = agents
        self._boxes = _MemoryBoxes() if state_dir is None else _FileBoxes(state_dir)
        self._look_every = look_every

    # ----- sandboxes -----

    async def get_or_create(self, request: SandboxRequest) -> tuple[SandboxInfo, bool]:
        found = self._boxes.load(request.name)
        if found is not None:
            return self._info(found), False
        box: Box = {
            "name": request.name,
            "state": "running",
            "labels": dict(request.labels),
            "created_at": time.time(),
            "process_id": None,
        }
        self._boxes.save(box)
        self._boxes.went(box, up=True)
        return self._info(box), True

    async def sandbox(self, sandbox_id: str) -> SandboxInfo:
        box = self._boxes.load(sandbox_id)
        if box is None:
            return SandboxInfo(sandbox_id=sandbox_id, name=sandbox_id, state="missing")
        return self._info(box)

    async def list(self, labels: dict[str, str], *, include_stopped: bool) -> list[SandboxInfo]:
        return [
            self._info(box)
            for box in self._boxes.all(labels.get(LABEL_RUN))
            if (include_stopped or box["state"] != "stopped")
            and all(box["labels"].get(k) == v for k, v in labels.items())
        ]

    async def pause(self, sandbox_id: str) -> SandboxInfo:
        return self._set_state(sandbox_id, "paused")

    async def stop(self, sandbox_id: str) -> SandboxInfo:
        return self._set_state(sandbox_id, "stopped")

    async def wake(self, sandbox_id: str) -> SandboxInfo:
        return self._set_state(sandbox_id, "running")

    async def extend(self, sandbox_id: str, seconds: float) -> SandboxInfo:
        return self._info(self._box(sandbox_id))

    async def set_labels(self, sandbox_id: str, labels: dict[str, str]) -> SandboxInfo:
        box = self._box(sandbox_id)
        box["labels"] = {**box["labels"], **labels}
        self._boxes.save(box)
        return self._info(box)

    async def aclose(self) -> None:
        """Nothing to close."""

    # ----- agents -----

    async def start_agent(self, sandbox_id: str, launch: AgentLaunch) -> ProcessInfo:
        box = self._running(sandbox_id)
        if box["process_id"] is None:
            box["process_id"] = launch.start_key
            self._agents.start(box, launch)
            self._boxes.save(box)
        return ProcessInfo(process_id=box["process_id"], state="running")

    async def process(self, sandbox_id: str, process_id: str) -> ProcessInfo:
        box = self._boxes.load(sandbox_id)
        if box is None or box["process_id"] != process_id:
            return ProcessInfo(process_id=process_id, state="missing")
        if box["state"] == "stopped":
            return ProcessInfo(process_id=process_id, state="killed")
        if self._agents.exited(box, time.time()):
            return ProcessInfo(process_id=process_id, state="exited", exit_code=0)
        return ProcessInfo(process_id=process_id, state="running")

    async def watch(self, request: WatchRequest) -> Sighting:
        # The kit's requests file is not kept: these agents write no requests.
        async def look() -> Look:
            box = self._boxes.load(request.sandbox_id)
            return Look(
                await self.sandbox(request.sandbox_id),
                await self.process(request.sandbox_id, request.process_id),
                "missing" if box is None else self._agents.mark(box, time.time()),
            )

        return await poll_watch(
            look,
            token=request.token,
            wait_seconds=request.wait_seconds,
            interval=self._look_every,
            report_touch=request.report_touch,
        )

    # ----- commands and files -----

    async def run(
        self, sandbox_id: str, command: str, *, cwd: str | None = None, timeout_seconds: float = 600
    ) -> CommandOutput:
        self._running(sandbox_id)
        return CommandOutput(exit_code=0, stdout="", stderr="")

    async def read_file(
        self, sandbox_id: str, path: str, max_bytes: int, *, seen_running: bool = False
    ) -> FileRead:
        text = self._agents.checkpoint(self._box(sandbox_id), time.time())
        if text is None:
            return FileRead(status="missing")
        data = text.encode()
        if len(data) > max_bytes:
            return FileRead(status="too_large", size=len(data))
        return FileRead(status="ok", size=len(data), data=data)

    async def write_file(self, sandbox_id: str, path: str, data: bytes) -> None:
        self._running(sandbox_id)

    async def upload_dir(self, sandbox_id: str, local_dir: str, remote_dir: str) -> None:
        self._running(sandbox_id)

    # ----- internals -----

    def _box(self, sandbox_id: str) -> Box:
        box = self._boxes.load(sandbox_id)
        if box is None:
            raise SandboxNotFound(sandbox_id)
        return box

    def _running(self, sandbox_id: str) -> Box:
        box = self._box(sandbox_id)
        if box["state"] != "running":
            raise SandboxNotRunning(sandbox_id, box["state"])
        return box

    def _set_state(self, sandbox_id: str, state: str) -> SandboxInfo:
        box = self._box(sandbox_id)
        was = box["state"]
        if was != "stopped" and was != state:
            box["state"] = state
            self._boxes.save(box)
            if was == "running" and state in ("paused", "stopped"):
                self._boxes.went(box, up=False)
            elif state == "running":
                self._boxes.went(box, up=True)
        return self._info(box)

    def _info(self, box: Box) -> SandboxInfo:
        return SandboxInfo(
            sandbox_id=box["name"],
            name=box["name"],
            state=box["state"],
            labels=dict(box["labels"]),
            created_at=datetime.fromtimestamp(box["created_at"], UTC),
        )


def short_agents(state_dir: Path, *, life: float = 0.2) -> FakeProvider:
    """Agents of `life` seconds in files under `state_dir`, looked at four times a second."""
    return FakeProvider(ShortLives(life), state_dir=state_dir, look_every=0.25)
