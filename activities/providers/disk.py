"""What a provider's sandboxes and snapshots hold on this machine's disk, and finishing deletes.

A third interface beside `SandboxProvider` and `SandboxForensics`, for `overnight disk` and
`overnight reap`: only providers whose sandboxes live on this machine have one (`local`,
`registry.disk_for`); a Runtime sandbox's disk is Runtime's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

# How long the record of a deleted sandbox (a local tombstone: its state and its agents'
# records, a few KiB) is kept, so `logs` can still say when and why it went.
RECORD_DAYS = 30


@dataclass(frozen=True)
class SandboxDisk:
    """One sandbox's folder: what it holds now (a stopped one: its tombstone only)."""

    sandbox_id: str
    state: str
    size_bytes: int
    labels: dict[str, str] = field(default_factory=dict)
    # A stopped sandbox: when its disk was deleted and what it held then.
    deleted_at: datetime | None = None
    freed_bytes: int | None = None
    # Its disk limit, and what its files hold under it where that is known apart from
    # `size_bytes` (a local image: what is used inside it; None: not known, or no limit).
    limit_bytes: int | None = None
    used_bytes: int | None = None
    # What it holds on the host beside its files (None: not known): processes (a local
    # sandbox's launchers and helpers, anything in its cgroup), their resident memory, and
    # the mounts under its folder (its image, where mounted); and why it must hold them.
    host: HostHeld | None = None


@dataclass(frozen=True)
class HostHeld:
    """What a sandbox holds on the host now, beside its files."""

    processes: int
    memory_bytes: int
    mounts: int
    # Why it holds them, for a paused sandbox that does ("" when it holds nothing, or runs).
    why: str = ""
    # Loop devices its image backs (attached until their last user closes them).
    loops: int = 0

    @property
    def nothing(self) -> bool:
        return not self.processes and not self.mounts and not self.loops


@dataclass(frozen=True)
class SnapshotDisk:
    snapshot_id: str
    size_bytes: int
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DiskUsage:
    """Everything the provider keeps under `root`, and the room left on its filesystem."""

    root: str
    sandboxes: list[SandboxDisk]
    snapshots: list[SnapshotDisk]
    # Deletes a process left half done (`overnight reap` finishes them).
    trash_bytes: int
    free_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class FinishedDelete:
    """A delete that `finish_deletes` completed: a trash entry, or a stopped sandbox whose
    disk had not been freed yet (a stop cut short, or one made before stops freed it)."""

    what: str
    kind: str  # "trash", "sandbox", or "records" (old tombstones, several at once)
    freed_bytes: int
    run_id: str = ""


class ProviderDisk(Protocol):
    async def usage(self) -> DiskUsage: ...

    async def finish_deletes(self, now: datetime) -> list[FinishedDelete]:
        """Complete every delete no live process is doing: trash entries and stopped
        sandboxes whose disk is still there; and forget the records of sandboxes deleted
        `RECORD_DAYS` before `now`."""
        ...

    async def freed_bytes(self, sandbox_id: str) -> int | None:
        """What deleting this sandbox freed (None: not deleted, or not known)."""
        ...

    async def let_go(self, sandbox_id: str) -> HostHeld | None:
        """A paused sandbox kept after its run ended lets go of what it holds on the host
        (its agents ended, its files kept): what it held (None: nothing, or not paused)."""
        ...
