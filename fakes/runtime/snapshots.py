"""The snapshot routes of the fake Runtime API, strict per reference section 6.

- `POST /v1/sandboxes/{id}:snapshot {name, labels, retentionDays, mode}`: refused (409
  `sandbox_not_paused`) unless the source is paused; answers `capturing`, and the capture is
  `ready` after `rules.snapshot_capture_seconds` only if the source stayed paused all along
  (woken early, it is `failed`: the real API's rule, so a client that wakes too soon is caught).
- `GET /v1/snapshots/{id}`, `GET /v1/snapshots` (`label=k:v`, `sandboxId`, `name`, `state`),
  `POST /v1/snapshots/{id}:delete` (and `DELETE`): a deleted snapshot answers 404.
- A create with `snapshot` (never with `image`: 400) starts as a copy of it, keeping its labels
  unless the create names others; it takes only its own `env` (processes are not given the
  source's environment).

Disk mode is faithful: the copy is the local engine's copy of `/workspace`. **Memory mode is a
simulation**: the engine cannot freeze processes into a file, so a memory snapshot is a disk
copy plus the list of processes that were running, which a sandbox made from it starts again
(same process ids and commands) from their first line. What a restored agent had in memory is
therefore lost here, as it would not be on Runtime: tests must not rely on memory contents
surviving, only on the process being there to adopt.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from typing import Any

from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import AgentLaunch
from fakes.runtime.http import (
    Request,
    Response,
    Route,
    RouteTable,
    error_response,
    json_response,
)
from fakes.runtime.rules import Rules
from fakes.runtime.sandboxes import Sandboxes, iso

SANDBOX = r"^/v1/sandboxes/([^/:]+)"
SNAPSHOT = r"^/v1/snapshots/([^/:]+)"


class SnapshotRoutes:
    def __init__(
        self, engine: LocalProvider, sandboxes: Sandboxes, rules: Rules, commands: Any
    ) -> None:
        self.engine = engine
        self.sandboxes = sandboxes
        self.rules = rules
        self.commands = commands
        self.records: dict[str, dict[str, Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def routes(self) -> RouteTable:
        return [
            Route("POST", re.compile(SANDBOX + ":snapshot$"), "snapshot", self._take),
            Route("GET", re.compile(r"^/v1/snapshots$"), "snapshots", self._list),
            Route("GET", re.compile(SNAPSHOT + "$"), "snapshot get", self._get),
            Route("POST", re.compile(SNAPSHOT + ":delete$"), "snapshot delete", self._delete),
            Route("DELETE", re.compile(SNAPSHOT + "$"), "snapshot delete", self._delete),
        ]

    def shown(self, record: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in record.items() if not k.startswith("_")}

    async def _take(self, request: Request, groups: list[str]) -> Response:
        record, info = await self.sandboxes.get(groups[0])
        body = request.json() or {}
        unknown = sorted(set(body) - {"name", "labels", "retentionDays", "mode"})
        if unknown:
            return error_response(400, "invalid_request", f"Unknown field {unknown[0]}.")
        mode = body.get("mode", "memory")
        if mode not in ("memory", "disk"):
            return error_response(400, "invalid_request", 'mode must be "memory" or "disk".')
        if info.state != "paused":
            return error_response(
                409, "sandbox_not_paused", f"Sandbox {record.id} is {info.state}: pause it first."
            )
        snap_id = "snap_" + uuid.uuid4().hex[:16]
        running = []
        if mode == "memory":
            for pid, spawn in self.commands._processes.get(record.id, {}).items():
                if (await self.engine.process(record.id, pid)).state == "running":
                    env = self.commands.envs.get((record.id, pid), {})
                    running.append({"id": pid, **spawn, "_env": env})
        snap = {
            "id": snap_id,
            "state": "capturing",
            "name": body.get("name"),
            "labels": dict(body.get("labels") or record.labels),
            "mode": mode,
            "sourceSandboxId": record.id,
            "retentionDays": int(body.get("retentionDays") or 7),
            "createdAt": iso(time.time()),
            "sizeBytes": None,
            "_processes": running,
        }
        self.records[snap_id] = snap
        task = asyncio.create_task(self._capture(snap, record.id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return json_response(self.shown(snap), 201)

    async def _capture(self, snap: dict[str, Any], source: str) -> None:
        await asyncio.sleep(self.rules.snapshot_capture_seconds)
        info = await self.engine.sandbox(source)
        if info.state != "paused":
            snap.update(state="failed", error="The source sandbox woke before the capture ended.")
            return
        copy = await self.engine.snapshot(
            source, name=snap["id"], mode="disk", labels=snap["labels"], retention_days=365
        )
        if (await self.engine.sandbox(source)).state != "paused":
            snap.update(state="failed", error="The source sandbox woke before the capture ended.")
            await self.engine.delete_snapshot(copy.snapshot_id)
            return
        snap.update(state="ready", sizeBytes=copy.size_bytes, _copy=copy.snapshot_id)

    def find(self, snapshot_id: str) -> dict[str, Any] | None:
        snap = self.records.get(snapshot_id)
        return None if snap is None or snap.get("_deleted") else snap

    async def _get(self, request: Request, groups: list[str]) -> Response:
        snap = self.find(groups[0])
        if snap is None:
            return error_response(404, "snapshot_not_found", f"No snapshot {groups[0]}.")
        return json_response(self.shown(snap))

    async def _list(self, request: Request, _: list[str]) -> Response:
        labels = dict(item.split(":", 1) for item in request.query.get("label", []))
        data = []
        for snap in self.records.values():
            if snap.get("_deleted"):
                continue
            if any(snap["labels"].get(k) != v for k, v in labels.items()):
                continue
            if request.arg("sandboxId") not in (None, snap["sourceSandboxId"]):
                continue
            if request.arg("name") not in (None, snap["name"]):
                continue
            if request.arg("state") not in (None, snap["state"]):
                continue
            data.append(self.shown(snap))
        return json_response({"data": data, "nextCursor": None})

    async def _delete(self, request: Request, groups: list[str]) -> Response:
        snap = self.records.get(groups[0])
        if snap is None:
            return error_response(404, "snapshot_not_found", f"No snapshot {groups[0]}.")
        if not snap.get("_deleted"):
            snap["_deleted"] = True
            if snap.get("_copy"):
                await self.engine.delete_snapshot(snap["_copy"])
        return json_response({"id": snap["id"], "status": "deleted"})

    # --- create from a snapshot (called by the create route) ---

    def problems(self, body: dict[str, Any]) -> Response | None:
        snap_id = body.get("snapshot")
        if snap_id is None:
            return None
        if body.get("image") is not None:
            return error_response(
                400,
                "invalid_request",
                "Give image or snapshot, not both.",
                details={"fields": ["image", "snapshot"], "field": "snapshot"},
            )
        snap = self.find(str(snap_id))
        if snap is None:
            return error_response(404, "snapshot_not_found", f"No snapshot {snap_id}.")
        if snap["state"] != "ready":
            return error_response(
                409, "snapshot_not_ready", f"Snapshot {snap_id} is {snap['state']}."
            )
        return None

    def labels_for(self, body: dict[str, Any]) -> dict[str, str] | None:
        snap = self.find(str(body.get("snapshot")))
        if snap is None or body.get("labels"):
            return None
        return dict(snap["labels"])

    def copy_of(self, snapshot_id: str) -> str:
        snap = self.find(snapshot_id)
        assert snap is not None
        return str(snap["_copy"])

    async def restart_processes(self, snapshot_id: str, sandbox_id: str) -> None:
        """Memory mode, simulated: start again what was running at the capture."""
        snap = self.find(snapshot_id)
        if snap is None:
            return
        for proc in snap["_processes"]:
            launch = AgentLaunch(proc["id"], proc["command"], proc["cwd"], proc["_env"])
            await self.engine.start_agent(sandbox_id, launch)
            spawn = {k: v for k, v in proc.items() if k != "_env"}
            self.commands._processes.setdefault(sandbox_id, {})[proc["id"]] = spawn
            self.commands.envs[(sandbox_id, proc["id"])] = dict(proc["_env"])
