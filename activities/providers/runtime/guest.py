"""What `RuntimeProvider` does inside a sandbox: commands run to completion (fitted to the
lease left), agents spawned once per start key (Runtime's spawn has no idempotency key: a
marker line in the command finds the first), their state, and files read (capped, streamed),
written and uploaded.

Touching a paused sandbox's guest wakes it, so every call here checks first that it runs
(`_running`), but for a read by a caller that has just watched it run.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

import withruntime

from activities.providers.protocol import (
    AgentLaunch,
    CommandOutput,
    FileRead,
    ProcessInfo,
    ProviderError,
    SandboxNotFound,
)
from activities.providers.runtime import watch_stream
from activities.providers.runtime.convert import (
    in_workspace,
    lease_left,
    process_info,
    start_marker,
)
from activities.providers.runtime.errors import runtime_call

# A command is given at most the lease left minus this, so it never outlasts the lease.
LEASE_SAFETY_SECONDS = 10


class RuntimeGuest:
    """Mixed into `RuntimeProvider` (which supplies `_get`, `_handle`, `_running` and
    `_budget`)."""

    _budget: float

    if TYPE_CHECKING:

        async def _get(self, sandbox_id: str) -> withruntime.AsyncSandbox: ...

        def _handle(self, sandbox_id: str) -> withruntime.AsyncSandbox: ...

        async def _running(self, sandbox_id: str) -> withruntime.AsyncSandbox: ...

    async def run(
        self, sandbox_id: str, command: str, *, cwd: str | None = None, timeout_seconds: float = 600
    ) -> CommandOutput:
        async with runtime_call(sandbox_id, self._budget + timeout_seconds):
            sandbox = await self._running(sandbox_id)
            # Runtime refuses a command that would outlast the lease (409 lease_too_short).
            left = lease_left(sandbox.info)
            if left is not None:
                if left - LEASE_SAFETY_SECONDS < 1:
                    raise ProviderError(
                        f"sandbox {sandbox_id} has {left:.0f} s of lease left: too little to "
                        "run a command",
                        kind="LeaseTooShort",
                    )
                timeout_seconds = min(timeout_seconds, left - LEASE_SAFETY_SECONDS)
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
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._running(sandbox_id)
            existing = _tagged(await sandbox.processes(), launch.start_key)
            if existing is not None:
                return process_info(existing)
            command = launch.command
            if launch.exit_marker is not None:
                command = watch_stream.wrap_with_exit_marker(command, launch.exit_marker)
            # Secrets travel only here, in this one spawn's environment.
            process = await sandbox.spawn(
                f"{marker}\n{command}", cwd=launch.cwd, env=dict(launch.env)
            )
        return process_info(process.info)

    async def find_agent(self, sandbox_id: str, start_key: str) -> ProcessInfo | None:
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._running(sandbox_id)
            existing = _tagged(await sandbox.processes(), start_key)
        return None if existing is None else process_info(existing)

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

    async def read_file(
        self, sandbox_id: str, path: str, max_bytes: int, *, seen_running: bool = False
    ) -> FileRead:
        """One request when `seen_running` (the caller has just watched it run), else two: the
        state is checked first, because a read would wake a paused sandbox. The download is
        streamed and given up past `max_bytes`, so an oversized file costs little."""
        if not in_workspace(path):
            return FileRead(status="outside")
        async with runtime_call(sandbox_id, self._budget):
            sandbox = self._handle(sandbox_id) if seen_running else await self._running(sandbox_id)
            try:
                return await _capped_read(sandbox, path, max_bytes)
            except withruntime.NotFoundError:
                return FileRead(status="missing")
            except withruntime.ConflictError as error:
                if error.code == "is_a_directory":
                    return FileRead(status="missing")
                raise
            except withruntime.PermissionDeniedError:
                # A path the sandbox refuses to serve (a link leading out of /workspace).
                return FileRead(status="outside")

    async def write_file(self, sandbox_id: str, path: str, data: bytes) -> None:
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._running(sandbox_id)
            await sandbox.files.write(path, data)

    async def upload_dir(self, sandbox_id: str, local_dir: str, remote_dir: str) -> None:
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._running(sandbox_id)
            await sandbox.files.upload(local_dir, remote_dir)


async def _capped_read(sandbox: withruntime.AsyncSandbox, path: str, max_bytes: int) -> FileRead:
    pieces: list[bytes] = []
    size = 0
    async for piece in sandbox.files.read_stream(path):
        pieces.append(piece)
        size += len(piece)
        if size > max_bytes:
            # Refused once past the cap: the rest of an oversized file is never downloaded.
            # One size for every oversized version, so the refusal is news only once.
            return FileRead(status="too_large", size=max_bytes + 1)
    data = b"".join(pieces)
    return FileRead(status="ok", size=len(data), data=data)


def _tagged(processes: list[dict[str, Any]], start_key: str) -> dict[str, Any] | None:
    """The process whose command carries `start_key`'s marker: the whole key, not a prefix of
    a longer one ("...-1" must not match "...-10")."""
    tagged = re.compile(re.escape(start_marker(start_key)) + r"(?![A-Za-z0-9_.:-])")
    for existing in processes:
        if tagged.search(str(existing.get("command") or "")):
            return existing
    return None
