"""Local disk snapshots: a copy of a paused sandbox's `/workspace`, kept under the state dir.

Layout under `home`::

    snapshots/<id>/snapshot.json    id, name, labels, mode, state, size, source, created_at
    snapshots/<id>/workspace/       the copy

Like Runtime: the source must be paused (a running sandbox is refused, so no file is copied
half-written), a snapshot is `ready` once the copy is whole (written to a temporary folder,
then renamed), and a sandbox made from it starts with its files. Local snapshots are `disk`
only: processes cannot be frozen into a file here.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path
from typing import Any

from activities.providers.local import disk as local_disk
from activities.providers.local.engine import LocalEngine
from activities.providers.local.fd_copy import copy_into
from activities.providers.local.files import read_json, write_json
from activities.providers.local.state import flock, invalid_request
from activities.providers.protocol import SandboxNotFound, SandboxNotRunning

SNAPSHOT_FILE = "snapshot.json"


class LocalSnapshots:
    def __init__(self, engine: LocalEngine):
        self.engine = engine
        self.root = engine.home / "snapshots"

    def snapshot_id(self, name: str) -> str:
        return "snap-" + hashlib.sha256(name.encode()).hexdigest()[:16]

    def take(
        self, sandbox_id: str, *, name: str, mode: str, labels: dict[str, str], retention_days: int
    ) -> dict[str, Any]:
        """Copy the paused sandbox's workspace. Idempotent by `name`."""
        if mode != "disk":
            raise invalid_request(f"the local provider offers disk snapshots only (not {mode!r})")
        meta = self.engine.find(sandbox_id)
        if meta is None:
            raise SandboxNotFound(sandbox_id)
        if meta.state != "paused":
            raise SandboxNotRunning(sandbox_id, f"{meta.state}, not paused (snapshot refused)")
        snap_id = self.snapshot_id(name)
        folder = self.root / snap_id
        self.root.mkdir(parents=True, exist_ok=True)
        with flock(self.root / ".lock"):
            found = read_json(folder / SNAPSHOT_FILE)
            if found is not None and found.get("state") == "ready":
                return found
            partial = self.root / f".{snap_id}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            self.engine.ensure_disk(sandbox_id)  # a paused one may have let go of its image
            source = self.engine.folder(sandbox_id) / "workspace"
            shutil.copytree(source, partial / "workspace", symlinks=True)
            size = _size(partial / "workspace")
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(partial, folder)
            record = {
                "id": snap_id,
                "name": name,
                "labels": dict(labels),
                "mode": "disk",
                "state": "ready",
                "sizeBytes": size,
                "source": sandbox_id,
                "createdAt": time.time(),
                "retentionDays": retention_days,
            }
            write_json(folder / SNAPSHOT_FILE, record)
            return record

    def get(self, snapshot_id: str) -> dict[str, Any] | None:
        if not snapshot_id.startswith("snap-") or "/" in snapshot_id:
            return None
        record = read_json(self.root / snapshot_id / SNAPSHOT_FILE)
        if record is None:
            return None
        expires = record.get("createdAt", 0) + record.get("retentionDays", 7) * 86400
        if time.time() >= expires:
            self.delete(snapshot_id)
            return None
        return record

    def delete(self, snapshot_id: str) -> None:
        if not snapshot_id.startswith("snap-") or "/" in snapshot_id:
            return
        # Renamed into the trash first, so a process killed half-way leaves nothing that
        # `overnight reap` cannot finish (see disk).
        local_disk.throw_away(self.root / snapshot_id, self.engine.trash_dir)

    def list(self, labels: dict[str, str]) -> list[dict[str, Any]]:
        if not self.root.is_dir():
            return []
        found = []
        for entry in sorted(self.root.iterdir()):
            if entry.name.startswith("."):
                continue
            record = self.get(entry.name)
            if record is not None and all(record["labels"].get(k) == v for k, v in labels.items()):
                found.append(record)
        return found

    def restore_into(self, snapshot_id: str, sandbox_id: str) -> None:
        """Fill a new sandbox's workspace with the snapshot's files (before anything runs)."""
        record = self.get(snapshot_id)
        if record is None or record.get("state") != "ready":
            raise invalid_request(f"snapshot {snapshot_id} is not ready")
        folder = self.engine.folder(sandbox_id)
        target = folder / "workspace"
        partial = folder / "workspace.restoring"
        shutil.rmtree(partial, ignore_errors=True)
        # The agent's files, copied and given to the sandbox's user by descriptor (fd_copy):
        # its links stay links, never followed, and nothing is chowned by path.
        owner = self.engine.get(sandbox_id).uid
        if os.path.ismount(target):
            # On the sandbox's own image (disk_image): the mount stays, what it holds is
            # replaced (no agent ran yet; a restore cut short is done again, then marked).
            _empty(target)
            copy_into(self.root / snapshot_id / "workspace", folder, [target.name], owner=owner)
            return
        copy_into(self.root / snapshot_id / "workspace", folder, [partial.name], owner=owner)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(partial, target)


def _empty(folder: Path) -> None:
    """Delete what `folder` holds, following no link (rmtree walks by descriptor)."""
    with os.scandir(folder) as listing:
        entries = list(listing)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def _size(folder: Path) -> int:
    total = 0
    for base, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(base, name)).st_size
            except OSError:
                pass
    return total
