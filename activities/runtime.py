"""The `runtime` provider: sandboxes on Runtime, through the real `withruntime` async client.

Facts of Runtime's API that shape this module:
- `spawn` has no idempotency key, so an agent start first looks for a process carrying the
  same start key (a comment line at the top of the spawned command).
- Reading a file (or running anything) in a paused sandbox wakes it, so every guest call is
  preceded by a state check and refused unless the sandbox is running.
- Pause, stop and extend answer with the sandbox, which is what they return here.
- A client's pooled connections belong to the event loop that opened them: one client per
  loop, built on first use in the worker (never at import).
"""

from __future__ import annotations

import asyncio
import math
import os
import posixpath
import re
import weakref
from datetime import datetime
from hashlib import sha256
from typing import Any

import withruntime

from activities.models import ProcessState, SandboxInfo, SandboxState
from activities.provider import (
    AgentLaunch,
    CommandOutput,
    FileRead,
    ProcessInfo,
    ProviderError,
    SandboxNotFound,
    SandboxNotRunning,
    SandboxRequest,
)
from activities.runtime_errors import runtime_call

API_KEY_VARIABLE = "RUNTIME_API_KEY"
START_KEY_MARKER = "# overnight-start-key="
WORKSPACE = "/workspace"
# Runtime's own states folded into the few the workflow reasons about.
_SANDBOX_STATES: dict[str, SandboxState] = {
    "starting": "starting",
    "resuming": "starting",
    "running": "running",
    "pausing": "paused",
    "paused": "paused",
    "stopping": "stopped",
    "stopped": "stopped",
    "deleted": "missing",
}
_PROCESS_STATES: dict[str, ProcessState] = {
    "running": "running",
    "exited": "exited",
    "killed": "killed",
}
_Client = withruntime.AsyncRuntime
_SAFE_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


class RuntimeProvider:
    """`SandboxProvider` on Runtime. The key is read from the worker's `RUNTIME_API_KEY` only.

    The SDK's own retries are kept short on purpose (`max_retries`, `timeout`, no capacity
    wait): its defaults wait minutes inside one activity attempt, invisible to Temporal.
    A failure here is raised quickly as a retryable `ProviderError`, and the activity retry
    policy's backoff (growing to minutes, visible in the UI) absorbs a storm instead.
    """

    def __init__(
        self,
        *,
        timeout_seconds: float = 75,
        max_retries: int = 2,
        call_budget_seconds: float = 180,
    ) -> None:
        # 75 s per attempt: a pause or stop may be held up to 60 s by `Prefer: wait=60`.
        self._timeout = timeout_seconds
        self._max_retries = max_retries
        self._budget = call_budget_seconds
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Client] = (
            weakref.WeakKeyDictionary()
        )

    def _client(self) -> _Client:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            key = os.environ.get(API_KEY_VARIABLE, "").strip()
            if not key:
                # Never fall back to a `runtime login` key saved on the worker's machine.
                raise ProviderError(
                    f"{API_KEY_VARIABLE} is not set in the worker's environment",
                    kind="MissingCredentials",
                    retryable=False,
                )
            try:
                # base_url=None: the SDK reads RUNTIME_API_URL, else Runtime's public API.
                client = withruntime.AsyncRuntime(
                    api_key=key,
                    timeout=self._timeout,
                    max_retries=self._max_retries,
                    wait_for_capacity=0,
                )
            except ValueError as error:
                raise ProviderError(
                    f"RUNTIME_API_URL is not usable: {error}",
                    kind="RuntimeMisconfigured",
                    retryable=False,
                ) from error
            self._clients[loop] = client
        return client

    async def _get(self, sandbox_id: str) -> withruntime.AsyncSandbox:
        sandbox: withruntime.AsyncSandbox = await self._client().sandboxes.get(sandbox_id)
        return sandbox

    async def _running(self, sandbox_id: str) -> withruntime.AsyncSandbox:
        """The sandbox, refused unless running: touching a paused one's guest would wake it."""
        sandbox = await self._get(sandbox_id)
        if sandbox.state != "running":
            raise SandboxNotRunning(sandbox_id, sandbox.state or "unknown")
        return sandbox

    async def get_or_create(self, request: SandboxRequest) -> tuple[SandboxInfo, bool]:
        async with runtime_call(None, self._budget):
            sandbox = await self._client().sandboxes.get_or_create(
                name=request.name,
                labels=request.labels,
                timeout_seconds=max(1, math.ceil(request.timeout_seconds)),
                on_lease_end="stop",
                vcpu=request.vcpu,
                memory_mib=request.memory_mib,
                # An agent waiting minutes on its model looks idle; it must never be paused.
                idle_pause_seconds=0,
                # Not waited by the SDK: a reused sandbox that stopped (its time limit passed
                # during an interrupted create) must come back as stopped, not as a retryable
                # `start_failed` that a retry would meet again.
                wait=False,
            )
            if sandbox.state in ("starting", "resuming"):
                await sandbox.wait_for("running", 60)
        return sandbox_info(sandbox.info), not sandbox.info.get("reused", False)

    async def sandbox(self, sandbox_id: str) -> SandboxInfo:
        try:
            async with runtime_call(sandbox_id, self._budget):
                sandbox = await self._get(sandbox_id)
        except SandboxNotFound:
            return SandboxInfo(sandbox_id=sandbox_id, state="missing")
        return sandbox_info(sandbox.info)

    async def run(
        self, sandbox_id: str, command: str, *, cwd: str | None = None, timeout_seconds: float = 600
    ) -> CommandOutput:
        async with runtime_call(sandbox_id, self._budget + timeout_seconds):
            sandbox = await self._running(sandbox_id)
            # Over 60 s the SDK streams the output (NDJSON) instead of one JSON answer.
            result = await sandbox.exec(
                command, cwd=cwd, timeout_ms=max(1, math.ceil(timeout_seconds * 1000))
            )
        return CommandOutput(
            exit_code=result.exit_code,
            stdout=result.stdout,
            stderr=result.stderr,
            timed_out=result.timed_out,
        )

    async def start_agent(self, sandbox_id: str, launch: AgentLaunch) -> ProcessInfo:
        marker = start_marker(launch.start_key)
        # The whole key, not a prefix of a longer one ("...-1" must not match "...-10").
        tagged = re.compile(re.escape(marker) + r"(?![A-Za-z0-9_.:-])")
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._running(sandbox_id)
            for existing in await sandbox.processes():
                if tagged.search(str(existing.get("command") or "")):
                    return process_info(existing)
            # Secrets travel only here, in this one spawn's environment.
            process = await sandbox.spawn(
                f"{marker}\n{launch.command}", cwd=launch.cwd, env=dict(launch.env)
            )
        return process_info(process.info)

    async def process(self, sandbox_id: str, process_id: str) -> ProcessInfo:
        try:
            async with runtime_call(sandbox_id, self._budget):
                sandbox = await self._get(sandbox_id)
                if sandbox.state in ("paused", "pausing"):
                    # Frozen with its sandbox; not asked of the guest, which would wake it.
                    return ProcessInfo(process_id=process_id, state="running")
                try:
                    process = await sandbox.process(process_id)
                except (withruntime.NotFoundError, withruntime.ConflictError):
                    ended = sandbox.state in ("stopped", "stopping")
                    return ProcessInfo(
                        process_id=process_id, state="killed" if ended else "missing"
                    )
        except SandboxNotFound:
            return ProcessInfo(process_id=process_id, state="missing")
        return process_info(process.info)

    async def read_file(self, sandbox_id: str, path: str, max_bytes: int) -> FileRead:
        if not in_workspace(path):
            return FileRead(status="outside")
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._running(sandbox_id)
            try:
                stat = await sandbox.files.stat(path)
                if not stat.get("exists") or stat.get("type") not in (None, "file"):
                    return FileRead(status="missing")
                size = int(stat.get("size") or 0)
                if size > max_bytes:
                    # Refused from its size alone: an oversized file is never downloaded.
                    return FileRead(status="too_large", size=size)
                data = await sandbox.files.read(path)
            except withruntime.NotFoundError:
                return FileRead(status="missing")
            except withruntime.PermissionDeniedError:
                # A path the sandbox refuses to serve (a link leading out of /workspace).
                return FileRead(status="outside")
        if len(data) > max_bytes:  # it grew between the stat and the read
            return FileRead(status="too_large", size=len(data))
        return FileRead(status="ok", size=len(data), data=data)

    async def write_file(self, sandbox_id: str, path: str, data: bytes) -> None:
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._running(sandbox_id)
            await sandbox.files.write(path, data)

    async def upload_dir(self, sandbox_id: str, local_dir: str, remote_dir: str) -> None:
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._running(sandbox_id)
            await sandbox.files.upload(local_dir, remote_dir)

    async def pause(self, sandbox_id: str) -> SandboxInfo:
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._get(sandbox_id)
            if sandbox.state in ("running", "starting", "resuming"):
                sandbox = await sandbox.pause()
        return sandbox_info(sandbox.info)

    async def stop(self, sandbox_id: str) -> SandboxInfo:
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._get(sandbox_id)
            if sandbox.state not in ("stopped", "stopping"):
                sandbox = await sandbox.stop()
        return sandbox_info(sandbox.info)

    async def extend(self, sandbox_id: str, seconds: float) -> SandboxInfo:
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._get(sandbox_id)
            sandbox = await sandbox.extend(max(1, math.ceil(seconds)))
        return sandbox_info(sandbox.info)

    async def list(self, labels: dict[str, str], *, include_stopped: bool) -> list[SandboxInfo]:
        async with runtime_call(None, self._budget):
            page = await self._client().sandboxes.list(
                labels=labels, include_stopped=include_stopped, limit=100
            )
            found = [sandbox_info(sandbox.info) async for sandbox in page]
        if include_stopped:
            return found
        return [info for info in found if info.state != "stopped"]

    async def aclose(self) -> None:
        """Close this loop's client; clients of other (finished) loops go with their loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        client = self._clients.pop(loop, None)
        if client is not None:
            await client.close()


def start_marker(start_key: str) -> str:
    """The comment line that tags a spawned agent with its start key."""
    key = start_key if _SAFE_KEY.match(start_key) else sha256(start_key.encode()).hexdigest()
    return f"{START_KEY_MARKER}{key}"


def in_workspace(path: str) -> bool:
    normal = posixpath.normpath(path)
    return path.startswith("/") and (normal == WORKSPACE or normal.startswith(WORKSPACE + "/"))


def sandbox_info(info: dict[str, Any]) -> SandboxInfo:
    labels = info.get("labels") or {}
    return SandboxInfo(
        sandbox_id=str(info["id"]),
        name=str(info.get("name") or ""),
        state=_SANDBOX_STATES.get(str(info.get("state") or ""), "starting"),
        stop_reason=info.get("stopReason"),
        labels={str(k): str(v) for k, v in labels.items()},
        created_at=_parse_time(info.get("createdAt")),
    )


def process_info(info: dict[str, Any]) -> ProcessInfo:
    exit_code = info.get("exitCode")
    state = _PROCESS_STATES.get(str(info.get("state") or ""))
    if state is None:
        state = "exited" if exit_code is not None else "running"
    return ProcessInfo(
        process_id=str(info["id"]),
        state=state,
        exit_code=int(exit_code) if exit_code is not None else None,
    )


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
