"""The local sandbox engine: sandboxes as folders, agents as real detached processes.

Layout under `home` (`$OVERNIGHT_HOME`, default `~/.overnight`)::

    sandboxes/<name>/sandbox.json       state (JSON, written atomically)
    sandboxes/<name>/.lock              flock held while the state or the processes change
    sandboxes/<name>/workspace/         what the sandbox sees as /workspace
    sandboxes/<name>/home/              $HOME of its commands and agents
    sandboxes/<name>/tmp/               its /tmp and /var/tmp, when isolated
    sandboxes/<name>/processes/<id>/    one agent each (see procs)
    trash/                              what stops are deleting (see disk)

A stop frees the folder but for a tombstone (its state, and each agent's records and output
tail), crash-safely (see disk): a stopped sandbox is gone, as on Runtime; a paused one keeps
everything.

Commands and agents run isolated with bubblewrap unless the sandbox was made with
`isolation="none"` (see isolation), limited as limits can.

Everything is in files, so any worker process (or the Runtime API fake) can pick up where
another left off. The engine is synchronous and thread-safe; callers on an event loop use
`asyncio.to_thread`. The time limit (the lease) is enforced twice: each agent's launcher acts
at the deadline, and so does every engine access to an expired sandbox. Like Runtime, the
lease end pauses the sandbox (`on_lease_end="pause"`: its cgroup frozen, files kept; see cgroups)
or stops it (`"stop"`: agents killed, `stop_reason` "lease_expired"); `wake` carries a paused
sandbox on with a fresh lease.

Failures are `ProviderError`s: `SandboxNotFound`, `SandboxNotRunning`, or kind
`InvalidRequest` (non-retryable) for a bad name, key, path or folder.

This module holds a sandbox's state and its lock; what is done with them is mixed in, a
concern a module: making one (creation), its life after (lifecycle), what runs in it
(guest_commands), its files (guest_files), and what a paused one lets go of (kept).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from activities.providers.local import disk as local_disk
from activities.providers.local import disk_image
from activities.providers.local.creation import SandboxCreation
from activities.providers.local.files import WorkspaceMap, read_json, write_json
from activities.providers.local.guest_commands import GuestCommands
from activities.providers.local.guest_files import GuestFiles
from activities.providers.local.kept import KeptSandboxes
from activities.providers.local.lifecycle import SandboxLifecycle
from activities.providers.local.state import (
    NAME_PATTERN,
    SANDBOX_FILE,
    SandboxMeta,
    default_home,
    flock,
    invalid_request,
)
from activities.providers.protocol import SandboxNotFound


class LocalEngine(SandboxCreation, SandboxLifecycle, GuestCommands, GuestFiles, KeptSandboxes):
    """Local sandboxes under `home`. Sandbox ids are their names.

    Sandboxes: `get_or_create`, `find` (None if absent), `get`, `list_sandboxes`, `pause`,
    `wake`, `stop` (frees its disk), `extend`, `set_labels`. Agents: `start_process`
    (idempotent by start key), `process`.
    Guest: `run`, `read_file` (capped), `write_file` (atomic), `upload_dir`, `host_path`.
    """

    def __init__(self, home: Path | str | None = None):
        self.home = Path(home).expanduser() if home is not None else default_home()
        self.sandboxes_dir = self.home / "sandboxes"
        self.trash_dir = self.home / local_disk.TRASH
        # Sandboxes that had let go of their image and that this engine mounted again for a
        # read (`let_go_again` unmounts them: a CLI's provider does at its close).
        self.mounted_again: set[str] = set()

    # ----- sandboxes -----

    def folder(self, sandbox_id: str) -> Path:
        if not NAME_PATTERN.match(sandbox_id):
            raise invalid_request(f"{sandbox_id!r} is not a valid sandbox name")
        return self.sandboxes_dir / sandbox_id

    def workspace(self, sandbox_id: str) -> WorkspaceMap:
        """The sandbox's /workspace on the host, its image mounted (again) first."""
        self.ensure_disk(sandbox_id)
        return WorkspaceMap(self.folder(sandbox_id) / "workspace")

    def find(self, sandbox_id: str) -> SandboxMeta | None:
        """The sandbox's current state, or None if there is none (one whose lease ran out is
        paused or stopped first)."""
        meta = self._load(sandbox_id)
        if (
            meta is not None
            and meta.disk == "image"
            and meta.state != "stopped"
            and meta.released_at is None
        ):
            # Mounted again after a reboot, unless a stop came in between (one that let go of
            # its image on purpose is mounted by what needs its files: `ensure_disk`).
            disk_image.attached(self.folder(sandbox_id), lambda: self._kept(sandbox_id))
        if meta is None or not meta.expired(time.time()):
            return meta
        with self._changing(sandbox_id) as current:
            return current

    def get(self, sandbox_id: str) -> SandboxMeta:
        meta = self.find(sandbox_id)
        if meta is None:
            raise SandboxNotFound(sandbox_id)
        return meta

    def list_sandboxes(
        self, labels: Mapping[str, str] | None = None, *, include_stopped: bool = False
    ) -> list[SandboxMeta]:
        """Sandboxes carrying all of `labels`, oldest first."""
        found = []
        if self.sandboxes_dir.is_dir():
            for folder in self.sandboxes_dir.iterdir():
                if not NAME_PATTERN.match(folder.name):
                    continue
                meta = self.find(folder.name)
                if meta is None or (meta.state == "stopped" and not include_stopped):
                    continue
                if all(meta.labels.get(k) == v for k, v in (labels or {}).items()):
                    found.append(meta)
        return sorted(found, key=lambda m: (m.created_at, m.id))

    # ----- internals -----

    def _load(self, sandbox_id: str) -> SandboxMeta | None:
        value = read_json(self.folder(sandbox_id) / SANDBOX_FILE)
        return None if value is None else SandboxMeta.from_json(value)

    def _kept(self, sandbox_id: str) -> bool:
        meta = self._load(sandbox_id)
        return meta is not None and meta.state != "stopped"

    def _save(self, meta: SandboxMeta) -> SandboxMeta:
        write_json(self.folder(meta.id) / SANDBOX_FILE, dataclasses.asdict(meta))
        return meta

    @contextmanager
    def _changing(self, sandbox_id: str) -> Iterator[SandboxMeta]:
        """Hold the sandbox's lock and yield its state, stopping it first if it expired."""
        folder = self.folder(sandbox_id)
        if not (folder / SANDBOX_FILE).exists():
            raise SandboxNotFound(sandbox_id)
        with flock(folder / ".lock"):
            meta = self._load(sandbox_id)
            if meta is None:
                raise SandboxNotFound(sandbox_id)
            if meta.expired(time.time()):
                meta = self._lease_end_locked(meta)
            yield meta

    def _procs(self, sandbox_id: str) -> Path:
        return self.folder(sandbox_id) / "processes"
