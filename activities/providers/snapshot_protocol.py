"""What a provider offers for snapshot recovery (`RunSpec.recovery: "snapshot"`).

Runtime's rules (reference section 6) hold for every provider: the source must be **paused**
and kept paused until the snapshot is `ready` or `failed`; a sandbox made with a snapshot
starts as a copy of it, keeping its labels unless the create names others. `disk` snapshots
hold the files; `memory` ones the running processes too (Runtime only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from activities.providers.protocol import ProcessInfo

SnapshotState = Literal["capturing", "ready", "failed", "missing"]


@dataclass(frozen=True)
class SnapshotInfo:
    snapshot_id: str
    state: SnapshotState
    name: str = ""
    mode: str = "disk"
    labels: dict[str, str] = field(default_factory=dict)
    size_bytes: int | None = None
    created_at: datetime | None = None
    source_sandbox_id: str | None = None
    error: str | None = None


@runtime_checkable
class SnapshotProvider(Protocol):
    async def snapshot(
        self,
        sandbox_id: str,
        *,
        name: str,
        mode: str,
        labels: dict[str, str],
        retention_days: int,
    ) -> SnapshotInfo:
        """Capture the paused sandbox and wait until the snapshot is ready or failed."""
        ...

    async def snapshot_info(self, snapshot_id: str) -> SnapshotInfo:
        """Its state; `state="missing"` (not an error) for one that no longer exists."""
        ...

    async def delete_snapshot(self, snapshot_id: str) -> None:
        """Delete it; one already gone is not an error."""
        ...

    async def list_snapshots(self, labels: dict[str, str]) -> list[SnapshotInfo]: ...

    async def find_agent(self, sandbox_id: str, start_key: str) -> ProcessInfo | None:
        """The process started with `start_key` in the sandbox, if there is one; never starts
        one (a memory snapshot's restore adopts the agent only when it really came back)."""
        ...
