"""Commands and processes of the fake Runtime API: `:exec`, spawn, process state, output.

Output (`GET …/processes/{pid}/output?cursor=N`) is read from the engine's
`<sandbox>/processes/<pid>/output.log` (stdout and stderr together, so every chunk is
`stdout`); offsets count its bytes, and only its last `output_keep_bytes` are kept (a process
object's `outputBytes` is the end of its output, a cursor). Two ways:

- `follow=true`: NDJSON, one event a line, written as the output grows:
  `{"type":"stdout","offset":N,"data":"…"}` (`"base64"` instead of `"data"` for a process
  spawned with outputEncoding "base64"), `{"type":"truncated","droppedBytes","resumeAt"}` when
  the cursor is older than what is kept, and at the end
  `{"type":"exit","exitCode":…,"state":"exited"|"killed","timedOut":false}`, or
  `{"type":"continue","cursor":N}` at the server's time limit (`stream_seconds`).
- `waitMs=M` (at most `max_wait_ms`): one JSON answer once there is output past the cursor, the
  process ended, or M ms passed: `{"events":[…the same events…],"nextCursor":N2,
  "state":"running"|"exited"|"killed","exitCode":…}`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shlex
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import AgentLaunch, ProcessInfo, SandboxProvider
from fakes.runtime.http import (
    Request,
    Response,
    Route,
    RouteTable,
    error_response,
    json_response,
)
from fakes.runtime.rules import MAX_EXEC_MS, Rules
from fakes.runtime.sandboxes import Sandboxes, lease_left

SANDBOX = r"^/v1/sandboxes/([^/:]+)"
PROCESS = SANDBOX + r"/processes/([^/:]+)"
# What a process's state is now (the engine asked each time).
ProcessState = Callable[[], Awaitable[ProcessInfo]]
DEFAULT_EXEC_MS = 60_000
SETTLE_SECONDS = 1.0
CHUNK_BYTES = 64 * 1024


def ndjson(event: dict[str, Any]) -> bytes:
    return json.dumps(event).encode() + b"\n"


def stream(events: AsyncIterator[bytes]) -> Response:
    return Response(200, headers={"content-type": "application/x-ndjson"}, stream=events)


class CommandRoutes:
    """`:exec`, spawn, process list and state, and process output."""

    def __init__(self, engine: SandboxProvider, sandboxes: Sandboxes, rules: Rules) -> None:
        self.envs: dict[tuple[str, str], dict[str, str]] = {}
        # What every command and process of a sandbox starts with, under its own `env`
        # (Runtime's proxy variables and egress secrets' placeholders: `guest_network`).
        self.guest_env: Callable[[], dict[str, str]] = dict
        self.engine = engine
        self.sandboxes = sandboxes
        self.rules = rules
        self._processes: dict[str, dict[str, dict[str, Any]]] = {}

    def adopt(self, sandbox_id: str, process_id: str, command: str, started: datetime) -> None:
        """A process the engine runs that no spawn made (a virtual agent): known from now on."""
        record = {
            "id": process_id,
            "command": command,
            "cwd": "/workspace",
            "startedAt": started.isoformat(),
            "user": "sandbox",
            "outputEncoding": "utf8",
        }
        self._processes.setdefault(sandbox_id, {})[process_id] = record

    def routes(self) -> RouteTable:
        return [
            Route("POST", re.compile(SANDBOX + ":exec$"), "exec", self._exec, guest=True),
            Route("POST", re.compile(SANDBOX + "/processes$"), "spawn", self._spawn, guest=True),
            Route("GET", re.compile(SANDBOX + "/processes$"), "processes", self._list, guest=True),
            Route("GET", re.compile(PROCESS + "$"), "process", self._process, guest=True),
            Route("GET", re.compile(PROCESS + "/output$"), "output", self._output, guest=True),
        ]

    # --- commands ---

    async def _exec(self, request: Request, groups: list[str]) -> Response:
        body = request.json() or {}
        record, info = await self.sandboxes.get(groups[0])
        left = lease_left(info)
        left_ms = None if left is None else max(0, int(left * 1000))
        asked = body.get("timeoutMs")
        timeout_ms = (
            asked if asked is not None else min(DEFAULT_EXEC_MS, left_ms or DEFAULT_EXEC_MS)
        )
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, (int, float)):
            return error_response(400, "invalid_request", "timeoutMs must be a number.")
        if self.rules.check_ranges and not 0 < timeout_ms <= MAX_EXEC_MS:
            return error_response(400, "invalid_request", "timeoutMs must be 1 to 86400000.")
        if self.rules.commands_fit_lease and left_ms is not None and timeout_ms > left_ms:
            return error_response(
                409,
                "lease_too_short",
                f"The command's timeout ({int(timeout_ms)} ms) outlasts the lease "
                f"({left_ms} ms left): extend the sandbox first, or give a shorter timeout.",
                details={"timeoutMs": timeout_ms, "leaseLeftMs": left_ms},
            )
        command = body.get("command") or shlex.join(body["argv"])
        env = self.guest_env() | (body.get("env") or {})
        if env:
            exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
            command = f"export {exports}\n{command}"
        process_id = f"exec_{uuid.uuid4().hex[:10]}"
        run = self.engine.run(
            record.id, command, cwd=body.get("cwd"), timeout_seconds=timeout_ms / 1000
        )
        started = time.monotonic()
        if not body.get("stream"):
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
            yield ndjson({"type": "start", "processId": process_id})
            out = await run
            offset = 0
            for kind, text in (("stdout", out.stdout), ("stderr", out.stderr)):
                if text:
                    yield ndjson({"type": kind, "offset": offset, "data": text})
                    offset += len(text.encode())
            duration = int((time.monotonic() - started) * 1000)
            exit_event = {"exitCode": out.exit_code, "timedOut": out.timed_out}
            yield ndjson({"type": "exit", **exit_event, "durationMs": duration})

        return stream(events())

    async def _spawn(self, request: Request, groups: list[str]) -> Response:
        body = request.json() or {}
        command = body.get("command") or shlex.join(body["argv"])
        # One spawn request, one process: a retry carries the same key, the engine's start key.
        start_key = "spawn-" + request.headers.get("idempotency-key", uuid.uuid4().hex)
        env = self.guest_env() | (body.get("env") or {})
        launch = AgentLaunch(start_key, command, body.get("cwd") or "/workspace", env)
        # The moment it was started: whatever it writes is newer.
        started_at = datetime.now(UTC).isoformat()
        started = await self.engine.start_agent(groups[0], launch)
        record = {
            "id": started.process_id,
            "command": command,
            "cwd": launch.cwd,
            "startedAt": started_at,
            "user": "sandbox",
            "outputEncoding": body.get("outputEncoding") or "utf8",
        }
        self._processes.setdefault(groups[0], {})[started.process_id] = record
        # Kept apart (never shown): a memory snapshot's simulation starts it again with it.
        self.envs[(groups[0], started.process_id)] = dict(launch.env)
        return json_response(await self._process_json(groups[0], started.process_id), 201)

    async def _process_json(self, sandbox_id: str, process_id: str) -> dict[str, Any]:
        info = await self.engine.process(sandbox_id, process_id)
        record = self._processes.get(sandbox_id, {}).get(process_id)
        if info.state == "missing" or record is None:
            raise KeyError(process_id)
        # Everything it wrote so far, in bytes (the end of its output, as a cursor).
        log = self._log(sandbox_id, process_id)
        size = log.stat().st_size if log is not None and log.exists() else 0
        lag = self.rules.exit_report_lag_seconds
        ended_at = info.ended_at
        if info.state != "running" and ended_at is not None and time.time() < ended_at + lag:
            return {**record, "state": "running", "exitCode": None, "outputBytes": size}
        return {**record, "state": info.state, "exitCode": info.exit_code, "outputBytes": size}

    async def _list(self, request: Request, groups: list[str]) -> Response:
        ids = list(self._processes.get(groups[0], {}))
        return json_response({"data": [await self._process_json(groups[0], pid) for pid in ids]})

    async def _process(self, request: Request, groups: list[str]) -> Response:
        try:
            return json_response(await self._process_json(*groups))
        except KeyError:
            return error_response(404, "process_not_found", "No such process.")

    # --- output ---

    async def _output(self, request: Request, groups: list[str]) -> Response:
        sandbox_id, process_id = groups
        record = self._processes.get(sandbox_id, {}).get(process_id)
        log = self._log(sandbox_id, process_id)
        if record is None or log is None:
            return error_response(404, "process_not_found", "No such process.")
        reader = OutputReader(log, record.get("outputEncoding") == "base64", self.rules)
        reader.cursor = max(0, int(request.arg("cursor") or 0))

        async def state() -> ProcessInfo:
            info = await self.engine.process(sandbox_id, process_id)
            # The engine may say "killed" for a moment between the agent's exit and its
            # launcher recording the exit code: an exit event is final, so let it settle.
            settle = time.monotonic() + SETTLE_SECONDS
            while info.state == "killed" and info.exit_code is None and time.monotonic() < settle:
                await asyncio.sleep(0.05)
                info = await self.engine.process(sandbox_id, process_id)
            return info

        if request.arg("follow") == "true":
            return stream(reader.follow(state))
        wait_ms = min(int(request.arg("waitMs") or 0), self.rules.max_wait_ms)
        return json_response(await reader.poll(state, wait_ms / 1000))

    def _log(self, sandbox_id: str, process_id: str) -> Path | None:
        if not isinstance(self.engine, LocalProvider):
            return None
        return self.engine.engine.folder(sandbox_id) / "processes" / process_id / "output.log"


class OutputReader:
    """One reader of a process's output log, from `cursor` on."""

    def __init__(self, log: Path, raw: bool, rules: Rules) -> None:
        self.log, self.raw, self.rules = log, raw, rules
        self.cursor = 0

    def read(self, ended: bool) -> list[dict[str, Any]]:
        """Output events past the cursor (a partial UTF-8 character waits, unless `ended`)."""
        try:
            size = self.log.stat().st_size
        except FileNotFoundError:
            return []
        events: list[dict[str, Any]] = []
        kept_from = max(0, size - self.rules.output_keep_bytes)
        if self.cursor < kept_from:
            events.append(
                {
                    "type": "truncated",
                    "droppedBytes": kept_from - self.cursor,
                    "resumeAt": kept_from,
                }
            )
            self.cursor = kept_from
        with open(self.log, "rb") as handle:
            handle.seek(self.cursor)
            data = handle.read(size - self.cursor)
        if not self.raw and not ended:
            data = data[: _complete_utf8(data)]
        while data:
            piece = data[:CHUNK_BYTES]
            if not self.raw and len(piece) < len(data):
                piece = piece[: _complete_utf8(piece)]  # never split a character
            body = (
                {"base64": base64.b64encode(piece).decode()} if self.raw else {"data": _text(piece)}
            )
            events.append({"type": "stdout", "offset": self.cursor, **body})
            self.cursor += len(piece)
            data = data[len(piece) :]
        return events

    @staticmethod
    def exit_event(info: ProcessInfo) -> dict[str, Any]:
        return {"type": "exit", "exitCode": info.exit_code, "state": info.state, "timedOut": False}

    async def follow(self, state: ProcessState) -> AsyncIterator[bytes]:
        until = time.monotonic() + self.rules.stream_seconds
        while True:
            info = await state()
            ended = info.state != "running"
            for event in self.read(ended):
                yield ndjson(event)
            if ended:
                yield ndjson(self.exit_event(info))
                return
            if time.monotonic() >= until:
                yield ndjson({"type": "continue", "cursor": self.cursor})
                return
            await asyncio.sleep(self.rules.poll_seconds)

    async def poll(self, state: ProcessState, wait_seconds: float) -> dict[str, Any]:
        until = time.monotonic() + wait_seconds
        while True:
            info = await state()
            ended = info.state != "running"
            events = self.read(ended)
            if ended:
                events.append(self.exit_event(info))
            if events or time.monotonic() >= until:
                return {
                    "events": events,
                    "nextCursor": self.cursor,
                    "state": info.state,
                    "exitCode": info.exit_code,
                }
            await asyncio.sleep(self.rules.poll_seconds)


def _complete_utf8(data: bytes) -> int:
    """The length of `data` without a trailing, unfinished UTF-8 character."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: the lead byte is further back
        need = 1 if byte < 0x80 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
        return len(data) if back >= need else len(data) - back
    return len(data)


def _text(piece: bytes) -> str:
    return piece.decode(errors="replace")
