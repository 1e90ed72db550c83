"""A `SandboxProvider` of trivially short agents, kept in files so that several worker processes
(one killed with SIGKILL, the next taking over) see the same sandboxes.

A sandbox is one JSON file in `state_dir`; its agent exits 0 `AGENT_SECONDS` (the spec's env,
default `life`) after it started, writing nothing. Every sandbox that comes up or goes down
(stopped or paused) appends a line to `events.jsonl`, so a test can tell how many sandboxes
existed at once, across processes, and in which order runs started.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
from overnight.constants import LABEL_RUN

EVENTS = "events.jsonl"


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


class ShortAgents:
    def __init__(self, state_dir: Path, *, life: float = 0.2, look_every: float = 0.25) -> None:
        self._dir = state_dir
        self._dir.mkdir(parents=True, exist_ok=True)
        self._life = life
        self._look_every = look_every

    # ----- sandboxes -----

    async def get_or_create(self, request: SandboxRequest) -> tuple[SandboxInfo, bool]:
        found = self._load(request.name)
        if found is not None:
            return self._info(found), False
        box = {
            "name": request.name,
            "state": "running",
            "labels": dict(request.labels),
            "created_at": time.time(),
            "process_id": None,
            "agent_started": None,
            "life": self._life,
        }
        self._save(box)
        self._event(box, up=True)
        return self._info(box), True

    async def sandbox(self, sandbox_id: str) -> SandboxInfo:
        box = self._load(sandbox_id)
        if box is None:
            return SandboxInfo(sandbox_id=sandbox_id, name=sandbox_id, state="missing")
        return self._info(box)

    async def list(self, labels: dict[str, str], *, include_stopped: bool) -> list[SandboxInfo]:
        found = []
        # A run's sandboxes are named `{run_id}-{attempt}`: read only theirs when asked.
        run_id = labels.get(LABEL_RUN)
        for path in sorted(self._dir.glob(f"box-{run_id}-*.json" if run_id else "box-*.json")):
            box = json.loads(path.read_text())
            if not include_stopped and box["state"] == "stopped":
                continue
            if all(box["labels"].get(k) == v for k, v in labels.items()):
                found.append(self._info(box))
        return found

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
        self._save(box)
        return self._info(box)

    async def aclose(self) -> None:
        """Nothing to close."""

    # ----- agents -----

    async def start_agent(self, sandbox_id: str, launch: AgentLaunch) -> ProcessInfo:
        box = self._running(sandbox_id)
        if box["process_id"] is None:
            box["process_id"] = launch.start_key
            box["agent_started"] = time.time()
            box["life"] = float(launch.env.get("AGENT_SECONDS", self._life))
            self._save(box)
        return ProcessInfo(process_id=box["process_id"], state="running")

    async def process(self, sandbox_id: str, process_id: str) -> ProcessInfo:
        box = self._load(sandbox_id)
        if box is None or box["process_id"] != process_id:
            return ProcessInfo(process_id=process_id, state="missing")
        if box["state"] == "stopped":
            return ProcessInfo(process_id=process_id, state="killed")
        if time.time() >= box["agent_started"] + box["life"]:
            return ProcessInfo(process_id=process_id, state="exited", exit_code=0)
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
            sandbox = await self.sandbox(sandbox_id)
            return Look(sandbox, await self.process(sandbox_id, process_id), "missing")

        return await poll_watch(
            look,
            token=token,
            wait_seconds=wait_seconds,
            interval=self._look_every,
            report_touch=report_touch,
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
        self._box(sandbox_id)
        return FileRead(status="missing")

    async def write_file(self, sandbox_id: str, path: str, data: bytes) -> None:
        self._running(sandbox_id)

    async def upload_dir(self, sandbox_id: str, local_dir: str, remote_dir: str) -> None:
        self._running(sandbox_id)

    # ----- files -----

    def _path(self, name: str) -> Path:
        return self._dir / f"box-{name}.json"

    def _load(self, name: str) -> dict[str, Any] | None:
        try:
            loaded: dict[str, Any] = json.loads(self._path(name).read_text())
        except FileNotFoundError:
            return None
        return loaded

    def _save(self, box: dict[str, Any]) -> None:
        path = self._path(box["name"])
        temp = path.with_suffix(f".{os.getpid()}.tmp")
        temp.write_text(json.dumps(box))
        temp.replace(path)

    def _box(self, name: str) -> dict[str, Any]:
        box = self._load(name)
        if box is None:
            raise SandboxNotFound(name)
        return box

    def _running(self, name: str) -> dict[str, Any]:
        box = self._box(name)
        if box["state"] != "running":
            raise SandboxNotRunning(name, box["state"])
        return box

    def _set_state(self, name: str, state: str) -> SandboxInfo:
        box = self._box(name)
        was = box["state"]
        if was != "stopped" and was != state:
            box["state"] = state
            self._save(box)
            if was == "running" and state in ("paused", "stopped"):
                self._event(box, up=False)
            elif state == "running":
                self._event(box, up=True)
        return self._info(box)

    def _event(self, box: dict[str, Any], *, up: bool) -> None:
        run_id = box["labels"].get(LABEL_RUN, "")
        line = json.dumps({"at": time.time(), "sandbox": box["name"], "run_id": run_id, "up": up})
        with (self._dir / EVENTS).open("a") as out:
            out.write(line + "\n")

    def _info(self, box: dict[str, Any]) -> SandboxInfo:
        return SandboxInfo(
            sandbox_id=box["name"],
            name=box["name"],
            state=box["state"],
            labels=dict(box["labels"]),
            created_at=datetime.fromtimestamp(box["created_at"], UTC),
        )
