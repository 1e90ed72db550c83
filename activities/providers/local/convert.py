"""The local engine's records as the provider interface's answers."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from activities.models import SandboxInfo
from activities.providers.local import disk_limit, run_store
from activities.providers.local import isolation as local_isolation
from activities.providers.local.procs import ProcessRecord
from activities.providers.local.state import SandboxMeta
from activities.providers.protocol import ProcessInfo
from activities.providers.snapshot_protocol import SnapshotInfo


def sandbox_info(meta: SandboxMeta) -> SandboxInfo:
    return SandboxInfo(
        sandbox_id=meta.id,
        name=meta.name,
        state=meta.state,
        stop_reason=meta.stop_reason,
        labels=meta.labels,
        pause_ends_agents=meta.pause_ends_agents(),
        created_at=datetime.fromtimestamp(meta.created_at, UTC),
        lease_ends_at=None if meta.deadline is None else datetime.fromtimestamp(meta.deadline, UTC),
        isolation=f"{local_isolation.describe(meta)}; {disk_words(meta)}",
        deleted_at=None if meta.freed_at is None else datetime.fromtimestamp(meta.freed_at, UTC),
        pause_reason=meta.pause_reason if meta.state == "paused" else None,
    )


def disk_words(meta: SandboxMeta) -> str:
    return disk_limit.describe(meta.disk, meta.disk_mib) + run_store.describe(meta.mounts)


def snapshot_info(record: dict[str, Any]) -> SnapshotInfo:
    return SnapshotInfo(
        snapshot_id=record["id"],
        state=record.get("state", "ready"),
        name=record.get("name", ""),
        mode=record.get("mode", "disk"),
        labels=dict(record.get("labels", {})),
        size_bytes=record.get("sizeBytes"),
        created_at=datetime.fromtimestamp(record.get("createdAt", 0), UTC),
        source_sandbox_id=record.get("source"),
    )


def process_info(record: ProcessRecord) -> ProcessInfo:
    return ProcessInfo(
        process_id=record.process_id,
        state=record.state,
        exit_code=record.exit_code,
        ended_at=record.ended_at,
    )
