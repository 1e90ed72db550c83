"""The sandbox and process routes of the fake Runtime API, answered by a sandbox engine.

Everything a sandbox does is delegated to a `SandboxProvider` (the local provider), so the
`runtime` provider tested through this fake runs the same engine the `local` provider does.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from activities.models import SandboxInfo
from activities.provider import AgentLaunch, SandboxNotFound, SandboxProvider, SandboxRequest
from tests.fake_runtime.http import Request, Response, RouteTable, error_response, json_response


class SandboxRoutes:
    """Sandboxes, their lifecycle verbs, commands and processes."""

    def __init__(
        self, engine: SandboxProvider, wake: Callable[[str], Awaitable[None]] | None = None
    ) -> None:
        self.engine = engine
        self._wake_engine = wake
        self.lock = threading.Lock()  # guards what tests read from their own thread
        self.wakes: list[tuple[str, str]] = []  # (sandbox id, what touched it while paused)
        self._meta: dict[str, dict[str, Any]] = {}
        self._deleted: set[str] = set()
        self._processes: dict[str, dict[str, dict[str, Any]]] = {}

    def routes(self) -> RouteTable:
        sandbox = r"^/v1/sandboxes/([^/:]+)"
        return [
            ("POST", re.compile(r"^/v1/sandboxes$"), self._create),
            ("GET", re.compile(r"^/v1/sandboxes$"), self._list),
            ("GET", re.compile(sandbox + "$"), self._get),
            ("DELETE", re.compile(sandbox + "$"), self._delete),
            ("POST", re.compile(sandbox + ":(pause|stop|extend)$"), self._verb),
            ("POST", re.compile(sandbox + ":exec$"), self._exec),
            ("POST", re.compile(sandbox + "/processes$"), self._spawn),
            ("GET", re.compile(sandbox + "/processes$"), self._processes_list),
            ("GET", re.compile(sandbox + "/processes/([^/:]+)$"), self._process),
        ]

    async def wake(self, sandbox_id: str, why: str) -> None:
        """Runtime wakes a paused sandbox when its guest is asked anything: so does the fake."""
        with self.lock:
            self.wakes.append((sandbox_id, why))
        if self._wake_engine is not None:
            await self._wake_engine(sandbox_id)

    async def info(self, sandbox_id: str) -> SandboxInfo:
        info = await self.engine.sandbox(sandbox_id)
        if info.state == "missing" or sandbox_id in self._deleted:
            raise SandboxNotFound(sandbox_id)
        return info

    def _json(self, info: SandboxInfo, **extra: Any) -> dict[str, Any]:
        created = info.created_at.isoformat() if info.created_at else None
        return {
            "id": info.sandbox_id,
            "state": info.state,
            "name": info.name,
            "labels": info.labels,
            "createdAt": created,
            "stopReason": info.stop_reason,
            **self._meta.get(info.sandbox_id, {}),
            **extra,
        }

    async def _create(self, request: Request, _: list[str]) -> Response:
        body = request.json() or {}
        name = body.get("name") or f"sbx-{uuid.uuid4().hex[:10]}"
        sandbox = SandboxRequest(
            name=name,
            labels=dict(body.get("labels") or {}),
            timeout_seconds=float(body.get("timeoutSeconds") or 86400),
            vcpu=int(body.get("vcpu") or 2),
            memory_mib=int(body.get("memoryMiB") or 4096),
        )
        info, created = await self.engine.get_or_create(sandbox)
        if not created and not body.get("getOrCreate"):
            return error_response(409, "name_taken", f"A sandbox is already named {name}.")
        if created:
            keep = ("timeoutSeconds", "onLeaseEnd", "vcpu", "memoryMiB", "idlePauseSeconds")
            self._meta[info.sandbox_id] = {k: body[k] for k in keep if k in body}
        elif info.state == "paused":
            await self.wake(info.sandbox_id, "POST /v1/sandboxes (get_or_create)")
            info = await self.info(info.sandbox_id)
        return json_response(self._json(info, reused=not created), 201 if created else 200)

    async def _list(self, request: Request, _: list[str]) -> Response:
        labels = dict(item.split(":", 1) for item in request.query.get("label", []))
        include_stopped = request.arg("includeStopped") == "true"
        states = set(request.query.get("state", []))
        found = await self.engine.list(labels, include_stopped=include_stopped)
        data = [
            self._json(info)
            for info in found
            if info.sandbox_id not in self._deleted
            and (not states or info.state in states)
            and request.arg("name") in (None, info.name)
        ]
        return json_response({"data": data, "nextCursor": None})

    async def _get(self, request: Request, groups: list[str]) -> Response:
        info = await self.info(groups[0])
        wanted = request.arg("waitFor")
        until = time.monotonic() + min(float(request.arg("timeoutSeconds") or 60), 10)
        while wanted and info.state != wanted and time.monotonic() < until:
            await asyncio.sleep(0.05)
            info = await self.info(groups[0])
        return json_response(self._json(info))

    async def _delete(self, request: Request, groups: list[str]) -> Response:
        info = await self.engine.stop((await self.info(groups[0])).sandbox_id)
        self._deleted.add(info.sandbox_id)
        return json_response({"id": info.sandbox_id, "status": "deleted", "state": "stopped"})

    async def _verb(self, request: Request, groups: list[str]) -> Response:
        sandbox_id, verb = groups
        await self.info(sandbox_id)
        if verb == "pause":
            info = await self.engine.pause(sandbox_id)
        elif verb == "stop":
            info = await self.engine.stop(sandbox_id)
        else:
            info = await self.engine.extend(sandbox_id, float((request.json() or {})["seconds"]))
        return json_response(self._json(info))

    # --- commands and processes ---

    async def _exec(self, request: Request, groups: list[str]) -> Response:
        body = request.json() or {}
        command = body.get("command") or shlex.join(body["argv"])
        if body.get("env"):
            exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in body["env"].items())
            command = f"export {exports}\n{command}"
        timeout = (body.get("timeoutMs") or 60_000) / 1000
        process_id = f"exec_{uuid.uuid4().hex[:10]}"
        run = self.engine.run(groups[0], command, cwd=body.get("cwd"), timeout_seconds=timeout)
        if not body.get("stream"):
            started = time.monotonic()
            out = await run
            return json_response(
                {
                    "exitCode": out.exit_code,
                    "stdout": out.stdout,
                    "stderr": out.stderr,
                    "timedOut": out.timed_out,
                    "durationMs": int((time.monotonic() - started) * 1000),
                    "processId": process_id,
                }
            )

        async def events() -> AsyncIterator[bytes]:
            yield _line({"type": "start", "processId": process_id})
            started = time.monotonic()
            out = await run
            offset = 0
            for kind, text in (("stdout", out.stdout), ("stderr", out.stderr)):
                if text:
                    yield _line({"type": kind, "offset": offset, "data": text})
                    offset += len(text.encode())
            duration = int((time.monotonic() - started) * 1000)
            yield _line(
                {
                    "type": "exit",
                    "exitCode": out.exit_code,
                    "timedOut": out.timed_out,
                    "durationMs": duration,
                }
            )

        return Response(200, headers={"content-type": "application/x-ndjson"}, stream=events())

    async def _spawn(self, request: Request, groups: list[str]) -> Response:
        body = request.json() or {}
        command = body.get("command") or shlex.join(body["argv"])
        # One spawn request, one process: a retry carries the same key, the engine's start key.
        start_key = "spawn-" + request.headers.get("idempotency-key", uuid.uuid4().hex)
        launch = AgentLaunch(
            start_key, command, body.get("cwd") or "/workspace", body.get("env") or {}
        )
        started = await self.engine.start_agent(groups[0], launch)
        record = {
            "id": started.process_id,
            "command": command,
            "cwd": launch.cwd,
            "startedAt": datetime.now(UTC).isoformat(),
            "user": "sandbox",
        }
        self._processes.setdefault(groups[0], {})[started.process_id] = record
        return json_response(await self._process_json(groups[0], started.process_id), 201)

    async def _process_json(self, sandbox_id: str, process_id: str) -> dict[str, Any]:
        info = await self.engine.process(sandbox_id, process_id)
        record = self._processes.get(sandbox_id, {}).get(process_id)
        if info.state == "missing" or record is None:
            raise KeyError(process_id)
        return {**record, "state": info.state, "exitCode": info.exit_code}

    async def _processes_list(self, request: Request, groups: list[str]) -> Response:
        ids = list(self._processes.get(groups[0], {}))
        return json_response({"data": [await self._process_json(groups[0], pid) for pid in ids]})

    async def _process(self, request: Request, groups: list[str]) -> Response:
        try:
            return json_response(await self._process_json(*groups))
        except KeyError:
            return error_response(404, "process_not_found", "No such process.")


def _line(event: dict[str, Any]) -> bytes:
    return json.dumps(event).encode() + b"\n"
