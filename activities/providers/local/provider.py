"""The `local` provider: the `SandboxProvider` interface on the local engine.

The engine is synchronous; each call runs in a thread so the worker's event loop stays free.
"""

from __future__ import annotations

import asyncio
import dataclasses

from activities.gateway import service as gateway_service
from activities.models import GatewayBooks, SandboxInfo
from activities.providers.local.agent_looks import LocalLook
from activities.providers.local.convert import process_info, sandbox_info, snapshot_info
from activities.providers.local.disk_watch import DiskWatch
from activities.providers.local.engine import LocalEngine
from activities.providers.local.event_watch import event_watch
from activities.providers.local.host_floor import FloorWatch
from activities.providers.local.read_pool import read_in_pool
from activities.providers.local.snapshots import LocalSnapshots
from activities.providers.local.state import process_id_for
from activities.providers.local.watch_hub import shared_hub
from activities.providers.polling_watch import Look, poll_watch
from activities.providers.protocol import (
    AgentLaunch,
    CommandOutput,
    FileRead,
    ModelEndpoint,
    ProcessInfo,
    SandboxNotFound,
    SandboxRequest,
    Sighting,
    WatchRequest,
)
from activities.providers.snapshot_protocol import SnapshotInfo
from overnight.core.constants import DISK_LIMIT_PREFIX

# In a sandbox made from a snapshot: which one its workspace was filled from (set once).
RESTORED_MARK = "restored-from"


class LocalProvider:
    """Sandboxes as folders under `$OVERNIGHT_HOME/sandboxes`, agents as local processes."""

    def __init__(self, engine: LocalEngine | None = None, *, kernel_watch: bool = True):
        self.engine = engine or LocalEngine()
        self.snapshots = LocalSnapshots(self.engine)
        # Watch with inotify and pidfds (event_watch); False: look on a timer (poll_watch).
        self.kernel_watch = kernel_watch
        # Sandboxes whose disk limit no image holds are measured while their agent is watched.
        self.disk_watch = DiskWatch(self.engine)
        # And every watched sandbox is paused while the host is below the worker's floor.
        self.floor_watch = FloorWatch(self.engine)

    async def get_or_create(self, request: SandboxRequest) -> tuple[SandboxInfo, bool]:
        meta, created = await asyncio.to_thread(
            self.engine.get_or_create,
            request.name,
            labels=request.labels,
            timeout_seconds=request.timeout_seconds,
            vcpu=request.vcpu,
            memory_mib=request.memory_mib,
            disk_mib=request.disk_mib,
            on_lease_end=request.on_lease_end,
            isolation=request.isolation,
            binds=request.binds,
            host_ports=request.host_ports,
            network=request.network,
            egress=request.egress,
            origin=None if request.origin is None else dataclasses.asdict(request.origin),
            origin_bind=request.origin_bind,
            model=None if request.model is None else dataclasses.asdict(request.model),
            mounts=request.mounts,
        )
        if request.snapshot_id is not None:
            await asyncio.to_thread(self._restore_once, meta.id, request.snapshot_id)
        return sandbox_info(meta), created

    def _restore_once(self, sandbox_id: str, snapshot_id: str) -> None:
        # Once per sandbox, before its agent starts: a retried create finds the mark.
        mark = self.engine.folder(sandbox_id) / RESTORED_MARK
        if mark.exists():
            return
        self.snapshots.restore_into(snapshot_id, sandbox_id)
        mark.write_text(snapshot_id)

    async def snapshot(
        self,
        sandbox_id: str,
        *,
        name: str,
        mode: str,
        labels: dict[str, str],
        retention_days: int,
    ) -> SnapshotInfo:
        record = await asyncio.to_thread(
            self.snapshots.take,
            sandbox_id,
            name=name,
            mode=mode,
            labels=labels,
            retention_days=retention_days,
        )
        return snapshot_info(record)

    async def snapshot_info(self, snapshot_id: str) -> SnapshotInfo:
        record = await asyncio.to_thread(self.snapshots.get, snapshot_id)
        if record is None:
            return SnapshotInfo(snapshot_id=snapshot_id, state="missing")
        return snapshot_info(record)

    async def delete_snapshot(self, snapshot_id: str) -> None:
        await asyncio.to_thread(self.snapshots.delete, snapshot_id)

    async def list_snapshots(self, labels: dict[str, str]) -> list[SnapshotInfo]:
        records = await asyncio.to_thread(self.snapshots.list, labels)
        return [snapshot_info(r) for r in records]

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

    async def git_remote(self, sandbox_id: str) -> str | None:
        meta = await asyncio.to_thread(self.engine.find, sandbox_id)
        if meta is None or meta.git_origin is None or meta.gateway_port is None:
            return None
        origin = gateway_service.origin_of(meta.git_origin)
        if origin is None:
            return None
        return gateway_service.git_remote(self.engine.home, sandbox_id, meta.gateway_port, origin)

    async def model_endpoint(self, sandbox_id: str) -> ModelEndpoint | None:
        meta = await asyncio.to_thread(self.engine.find, sandbox_id)
        if meta is None or meta.model is None or meta.gateway_port is None:
            return None
        home = self.engine.home
        token = await asyncio.to_thread(gateway_service.model_token, home, sandbox_id)
        return ModelEndpoint(url=gateway_service.model_url(meta.gateway_port), token=token)

    async def model_books(self, run_id: str) -> GatewayBooks:
        return await asyncio.to_thread(gateway_service.books_of, self.engine.home, run_id)

    async def set_model_cap(self, sandbox_id: str, cap_usd: float | None) -> bool:
        return await asyncio.to_thread(self.engine.set_model_cap, sandbox_id, cap_usd)

    async def egress_refusals(self, sandbox_id: str) -> dict[str, int]:
        return await asyncio.to_thread(gateway_service.refusals_of, self.engine.home, sandbox_id)

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

    async def find_agent(self, sandbox_id: str, start_key: str) -> ProcessInfo | None:
        found = await self.process(sandbox_id, process_id_for(start_key))
        return None if found.state == "missing" else found

    async def process(self, sandbox_id: str, process_id: str) -> ProcessInfo:
        try:
            record = await asyncio.to_thread(self.engine.process, sandbox_id, process_id)
        except SandboxNotFound:
            record = None
        if record is None:
            return ProcessInfo(process_id=process_id, state="missing")
        return process_info(record)

    async def watch(self, request: WatchRequest) -> Sighting:
        sandbox_id, process_id = request.sandbox_id, request.process_id
        checkpoint_path, requests_path = request.checkpoint_path, request.requests_path
        token, wait_seconds = request.token, request.wait_seconds
        report_touch = request.report_touch
        floor = self.floor_watch.guarding(sandbox_id)
        async with self.disk_watch.guarding(sandbox_id), floor:
            return await self._watch(
                LocalLook(self.engine, sandbox_id, process_id, checkpoint_path, requests_path),
                token=token,
                wait_seconds=wait_seconds,
                report_touch=report_touch,
            )

    async def _watch(
        self, look: LocalLook, *, token: str | None, wait_seconds: float, report_touch: bool
    ) -> Sighting:
        hub = shared_hub() if self.kernel_watch else None
        if hub is not None:
            return await event_watch(
                hub, look, token=token, wait_seconds=wait_seconds, report_touch=report_touch
            )

        async def look_here() -> Look:
            # A few stat calls (~15 us): cheaper on the event loop than a hop to a thread,
            # which would cost more than the look for thousands of watched runs.
            return look()

        return await poll_watch(
            look_here,
            token=token,
            wait_seconds=wait_seconds,
            report_touch=report_touch,
        )

    async def read_file(
        self, sandbox_id: str, path: str, max_bytes: int, *, seen_running: bool = False
    ) -> FileRead:
        # Agent files are read in a pool of their own, a sandbox at a time (read_pool).
        return await read_in_pool(sandbox_id, self.engine.read_file, sandbox_id, path, max_bytes)

    async def write_file(self, sandbox_id: str, path: str, data: bytes) -> None:
        await asyncio.to_thread(self.engine.write_file, sandbox_id, path, data)

    async def upload_dir(self, sandbox_id: str, local_dir: str, remote_dir: str) -> None:
        await asyncio.to_thread(self.engine.upload_dir, sandbox_id, local_dir, remote_dir)

    async def pause(self, sandbox_id: str) -> SandboxInfo:
        return sandbox_info(await asyncio.to_thread(self.engine.pause, sandbox_id))

    async def wake(self, sandbox_id: str, timeout_seconds: float | None = None) -> SandboxInfo:
        """A sandbox paused past its disk limit stays paused (kept for a look): woken, it would
        write on past it; its run goes on in a new sandbox from the checkpoint."""
        meta = await asyncio.to_thread(self.engine.find, sandbox_id)
        if meta is not None and meta.state == "paused" and past_disk_limit(meta.pause_reason):
            return sandbox_info(meta)
        return sandbox_info(await asyncio.to_thread(self.engine.wake, sandbox_id, timeout_seconds))

    async def stop(self, sandbox_id: str) -> SandboxInfo:
        return sandbox_info(await asyncio.to_thread(self.engine.stop, sandbox_id))

    async def extend(self, sandbox_id: str, seconds: float) -> SandboxInfo:
        return sandbox_info(await asyncio.to_thread(self.engine.extend, sandbox_id, seconds))

    async def set_labels(self, sandbox_id: str, labels: dict[str, str]) -> SandboxInfo:
        return sandbox_info(await asyncio.to_thread(self.engine.set_labels, sandbox_id, labels))

    async def list(self, labels: dict[str, str], *, include_stopped: bool) -> list[SandboxInfo]:
        metas = await asyncio.to_thread(
            self.engine.list_sandboxes, labels, include_stopped=include_stopped
        )
        return [sandbox_info(meta) for meta in metas]

    async def let_go(self, sandbox_id: str) -> SandboxInfo:
        """A paused sandbox kept after its run ended: its agents ended, its image unmounted
        (engine.let_go)."""
        meta = await asyncio.to_thread(self.engine.let_go, sandbox_id, end_agents=True)
        return sandbox_info(meta)

    async def aclose(self) -> None:
        """The engine holds no connections; the images it mounted again for a read of a
        paused sandbox that had let go of them are unmounted again."""
        await asyncio.to_thread(self.engine.let_go_again)


def past_disk_limit(pause_reason: str | None) -> bool:
    return pause_reason is not None and pause_reason.startswith(DISK_LIMIT_PREFIX)
