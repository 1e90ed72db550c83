"""The local provider's disk account: what its sandboxes and snapshots hold under
`$OVERNIGHT_HOME`, and finishing the deletes a killed process left half done (see disk)."""

from __future__ import annotations

import asyncio
import fcntl
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from activities.providers.disk import (
    RECORD_DAYS,
    DiskUsage,
    FinishedDelete,
    HostHeld,
    SandboxDisk,
    SnapshotDisk,
)
from activities.providers.local import disk as local_disk
from activities.providers.local import disk_image, host_holds
from activities.providers.local.disk_limit import MIB
from activities.providers.local.engine import LocalEngine
from activities.providers.local.files import read_json
from activities.providers.local.snapshots import SNAPSHOT_FILE
from activities.providers.local.state import SANDBOX_FILE, SandboxMeta, flock
from activities.providers.protocol import ProviderError
from overnight.core.constants import LABEL_RUN


class LocalDiskAccount:
    def __init__(self, engine: LocalEngine) -> None:
        self.engine = engine
        self.snapshots_root = engine.home / "snapshots"

    async def usage(self) -> DiskUsage:
        return await asyncio.to_thread(self._usage)

    async def finish_deletes(self, now: datetime) -> list[FinishedDelete]:
        return await asyncio.to_thread(self._finish, now)

    async def freed_bytes(self, sandbox_id: str) -> int | None:
        meta = await asyncio.to_thread(self.engine.find, sandbox_id)
        return None if meta is None else meta.freed_bytes

    async def let_go(self, sandbox_id: str) -> HostHeld | None:
        return await asyncio.to_thread(self._let_go, sandbox_id)

    def _let_go(self, sandbox_id: str) -> HostHeld | None:
        meta = self.engine.find(sandbox_id)
        if meta is None or meta.state != "paused":
            return None
        before = self._held(meta)
        if before.nothing:
            return None
        self.engine.let_go(sandbox_id, end_agents=True)
        return before

    def _held(self, meta: SandboxMeta) -> HostHeld:
        found = host_holds.holds(meta, self.engine.folder(meta.id))
        why = ""
        if meta.state == "paused" and found.pids:
            why = "its agent is alive in it, frozen, for its run to wake (the same process goes on)"
        elif meta.state == "paused" and found.mounts:
            why = "its image is mounted for a read (overnight reap unmounts it)"
        elif meta.state == "paused" and found.loops:
            why = f"its image's loop device is not detached yet ({meta.loop_held or 'a moment'})"
        return HostHeld(len(found.pids), found.memory_bytes, found.mounts, why, found.loops)

    def _usage(self) -> DiskUsage:
        home = self.engine.home
        sandboxes = [self._sandbox(meta) for meta in self._metas()]
        snapshots = [
            SnapshotDisk(entry.name, local_disk.tree_bytes(entry), _snapshot_labels(entry) or {})
            for entry in _entries(self.snapshots_root)
            if not entry.name.startswith(".")
        ]
        leftovers = sum(local_disk.tree_bytes(entry) for entry in self._snapshot_leftovers())
        room = shutil.disk_usage(home if home.is_dir() else home.parent)
        return DiskUsage(
            root=str(home),
            sandboxes=sandboxes,
            snapshots=snapshots,
            trash_bytes=sum(map(local_disk.tree_bytes, _entries(self.engine.trash_dir)))
            + leftovers,
            free_bytes=room.free,
            total_bytes=room.total,
        )

    def _sandbox(self, meta: SandboxMeta) -> SandboxDisk:
        folder = self.engine.folder(meta.id)
        # What this filesystem holds for it: its image as the (sparse) file it is, not again
        # as what is mounted from it; at least what is used inside it (written, but maybe
        # not yet flushed to the file).
        size = local_disk.tree_bytes(folder, one_filesystem=True)
        inside = disk_image.in_use(folder) if meta.disk == "image" else None
        if inside is not None:
            image = local_disk.tree_bytes(folder / disk_image.IMAGE_FILE)
            size += max(0, inside[0] - image)
        return SandboxDisk(
            sandbox_id=meta.id,
            state=meta.state,
            size_bytes=size,
            labels=dict(meta.labels),
            deleted_at=_when(meta.freed_at),
            freed_bytes=meta.freed_bytes,
            limit_bytes=None if meta.disk_mib is None or meta.freed_at else meta.disk_mib * MIB,
            used_bytes=None if inside is None else inside[0],
            host=None if meta.freed_at else self._held(meta),
        )

    def _finish(self, now: datetime) -> list[FinishedDelete]:
        done = [
            FinishedDelete(name, "trash", freed)
            for name, freed in local_disk.empty_trash(self.engine.trash_dir)
        ]
        done += self._finish_snapshots()
        done += self._unmount_half_made()
        for meta in self._metas():
            if meta.state != "stopped" or meta.freed_at is not None:
                continue
            try:
                freed = self.engine.stop(meta.id)  # a stopped one: only its freeing is done
            except ProviderError:
                continue
            done.append(
                FinishedDelete(
                    meta.id, "sandbox", freed.freed_bytes or 0, meta.labels.get(LABEL_RUN, "")
                )
            )
        done += self._forget_old_records(now)
        return done

    def _unmount_half_made(self) -> list[FinishedDelete]:
        """Images a create killed before the sandbox's state was written left mounted (a
        stopped sandbox's are unmounted by its freeing): unmounted, the image deleted. Under
        the creates' lock, so a create in progress is waited for, not undone."""
        done: list[FinishedDelete] = []
        root = self.engine.sandboxes_dir
        if not any(p.parent.parent == root for p in disk_image.mounts_under(root)):
            return done
        with flock(root / ".create.lock"):
            for folder in sorted({p.parent for p in disk_image.mounts_under(root)}):
                if folder.parent != root or (folder / SANDBOX_FILE).exists():
                    continue
                disk_image.detach(folder)
                image = folder / disk_image.IMAGE_FILE
                size = local_disk.tree_bytes(image)
                image.unlink(missing_ok=True)
                done.append(FinishedDelete(folder.name, "sandbox", size))
        return done

    def _forget_old_records(self, now: datetime) -> list[FinishedDelete]:
        before = (now - timedelta(days=RECORD_DAYS)).timestamp()
        old = [m for m in self._metas() if m.freed_at is not None and m.freed_at < before]
        if not old:
            return []
        freed = sum(
            local_disk.throw_away(self.engine.folder(m.id), self.engine.trash_dir) for m in old
        )
        return [FinishedDelete(f"{len(old)} deleted sandboxes", "records", freed)]

    def _finish_snapshots(self) -> list[FinishedDelete]:
        """Copies a killed process left half made or half deleted (`.<id>.partial`,
        `.<id>.deleting`), unless a snapshot is being taken right now."""
        leftovers = self._snapshot_leftovers()
        if not leftovers:
            return []
        with open(self.snapshots_root / ".lock", "ab") as lock:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return []
            return [
                FinishedDelete(
                    entry.name, "trash", local_disk.throw_away(entry, self.engine.trash_dir)
                )
                for entry in leftovers
            ]

    def _snapshot_leftovers(self) -> list[Path]:
        return [
            entry
            for entry in _entries(self.snapshots_root)
            if entry.name.endswith((".partial", ".deleting")) and entry.name.startswith(".")
        ]

    def _metas(self) -> list[SandboxMeta]:
        return self.engine.list_sandboxes({}, include_stopped=True)


def _when(stamp: float | None) -> datetime | None:
    return None if stamp is None else datetime.fromtimestamp(stamp, UTC)


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def _snapshot_labels(folder: Path) -> dict[str, str] | None:
    record = read_json(folder / SNAPSHOT_FILE)
    return dict(record.get("labels", {})) if isinstance(record, dict) else None
