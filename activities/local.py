"""The `local` provider: the `SandboxProvider` interface on the local engine.

The engine is synchronous; each call runs in a thread so the worker's event loop stays free.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from activities import local_isolation
from activities.local_engine import LocalEngine
from activities.local_procs import ProcessRecord
from activities.local_state import SandboxMeta
from activities.models import SandboxInfo
from activities.polling_watch import Look, poll_watch
from activities.provider import (
    AgentLaunch,
    CommandOutput,
    FileRead,
    ProcessInfo,
    SandboxNotFound,
    SandboxRequest,
    Sighting,
)


def sandbox_info(meta: SandboxMeta) -> SandboxInfo:
    return SandboxInfo(
        sandbox_id=meta.id,
        name=meta.name,
        state=meta.state,
        stop_reason=meta.stop_reason,
        labels=meta.labels,
        created_at=datetime.fromtimestamp(meta.created_at, UTC),
        lease_ends_at=None if meta.deadline is None else datetime.fromtimestamp(meta.deadline, UTC),
        isolation=local_isolation.describe(meta),
    )


def process_info(record: ProcessRecord) -> ProcessInfo:
    return ProcessInfo(process_id=record.process_id, state=record.state, exit_code=record.exit_code)


class LocalProvider:
    """Sandboxes as folders under `$OVERNIGHT_HOME/sandboxes`, agents as local processes."""

    def __init__(self, engine: LocalEngine | None = None):
        self.engine = engine or LocalEngine()

    async def get_or_create(self, request: SandboxRequest) -> tuple[SandboxInfo, bool]:
        meta, created = await asyncio.to_thread(
            self.engine.get_or_create,
            request.name,
            labels=request.labels,
            timeout_seconds=request.timeout_seconds,
            vcpu=request.vcpu,
            memory_mib=request.memory_mib,
            on_lease_end=request.on_lease_end,
            isolation=request.isolation,
            binds=request.binds,
        )
        return sandbox_info(meta), created

    async def sandbox(self, sandbox_id: str) -> SandboxInfo:
        meta = await asyncio.to_thread(self.engine.find, sandbox_id)
        if meta is None:
            return SandboxInfo(sandbox_id=sandbox_id, name=sandbox_id, state="missing")
        return sandbox_info(meta)

    async def run(
        self, sandbox_id: str, command: str, *, cwd: str | None = None, timeout_seconds: float = 600
    ) -> CommandOutput:
        return await asyncio.to_thread(
            self.engine.run, sandbox_id, command, cwd=cwd, timeout_seconds=timeout_seconds
        )

    async def start_agent(self, sandbox_id: str, launch: AgentLaunch) -> ProcessInfo:
        record, _ = await asyncio.to_thread(
            self.engine.start_process,
            sandbox_id,
            launch.start_key,
            launch.command,
            cwd=launch.cwd,
            env=launch.env,
        )
        return process_info(record)

    async def process(self, sandbox_id: str, process_id: str) -> ProcessInfo:
        try:
            record = await asyncio.to_thread(self.engine.process, sandbox_id, process_id)
        except SandboxNotFound:
            record = None
        if record is None:
            return ProcessInfo(process_id=process_id, state="missing")
        return process_info(record)

    async def watch(
        self,
        sandbox_id: str,
        process_id: str,
        checkpoint_path: str,
        *,
        token: str | None,
        wait_seconds: float,
        report_touch: bool = True,
    ) -> Sighting:
        def look() -> Look:
            meta = self.engine.find(sandbox_id)
            if meta is None:
                gone = SandboxInfo(sandbox_id=sandbox_id, name=sandbox_id, state="missing")
                return Look(gone, ProcessInfo(process_id=process_id, state="missing"), "missing")
            try:
                record = self.engine.process(sandbox_id, process_id)
            except SandboxNotFound:
                record = None
            process = (
                ProcessInfo(process_id=process_id, state="missing")
                if record is None
                else process_info(record)
            )
            return Look(sandbox_info(meta), process, self.engine.stamp(sandbox_id, checkpoint_path))

        return await poll_watch(
            lambda: asyncio.to_thread(look),
            token=token,
            wait_seconds=wait_seconds,
            report_touch=report_touch,
        )

    async def read_file(
        self, sandbox_id: str, path: str, max_bytes: int, *, seen_running: bool = False
    ) -> FileRead:
        return await asyncio.to_thread(self.engine.read_file, sandbox_id, path, max_bytes)

    async def write_file(self, sandbox_id: str, path: str, data: bytes) -> None:
        await asyncio.to_thread(self.engine.write_file, sandbox_id, path, data)

    async def upload_dir(self, sandbox_id: str, local_dir: str, remote_dir: str) -> None:
        await asyncio.to_thread(self.engine.upload_dir, sandbox_id, local_dir, remote_dir)

    async def pause(self, sandbox_id: str) -> SandboxInfo:
        return sandbox_info(await asyncio.to_thread(self.engine.pause, sandbox_id))

    async def wake(self, sandbox_id: str, timeout_seconds: float | None = None) -> SandboxInfo:
        return sandbox_info(await asyncio.to_thread(self.engine.wake, sandbox_id, timeout_seconds))

    async def stop(self, sandbox_id: str) -> SandboxInfo:
        return sandbox_info(await asyncio.to_thread(self.engine.stop, sandbox_id))

    async def extend(self, sandbox_id: str, seconds: float) -> SandboxInfo:
        return sandbox_info(await asyncio.to_thread(self.engine.extend, sandbox_id, seconds))

    async def list(self, labels: dict[str, str], *, include_stopped: bool) -> list[SandboxInfo]:
        metas = await asyncio.to_thread(
            self.engine.list_sandboxes, labels, include_stopped=include_stopped
        )
        return [sandbox_info(meta) for meta in metas]

    async def aclose(self) -> None:
        """Nothing to close: the engine holds no connections."""
