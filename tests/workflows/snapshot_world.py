"""`FakeWorld` with snapshots: captures (each one the sandbox's checkpoint file at that
moment), deletions, and creates from a snapshot, all recorded for the test to read."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from temporalio import activity

from activities.models import (
    ActivityName,
    AgentStarted,
    CheckpointRead,
    CreateSandboxInput,
    DeleteSnapshotsInput,
    SnapshotList,
    SnapshotTaken,
    TakeSnapshotInput,
)
from fakes.activities import FakeWorld

GIB = 2**30


class SnapshotWorld(FakeWorld):
    def __init__(self) -> None:
        super().__init__()
        # Every capture asked for: (workflow time, input).
        self.takes: list[tuple[datetime, TakeSnapshotInput]] = []
        # Ready snapshots: id -> the checkpoint file it holds.
        self.snapshots: dict[str, CheckpointRead | None] = {}
        self.deleted: list[str] = []
        # Capture numbers that fail.
        self.failing: set[int] = set()
        # Creates made from a snapshot: (attempt, snapshot id).
        self.restores: list[tuple[int, str]] = []

    def activities(self) -> list[Callable[..., Any]]:
        return [*super().activities(), self.take_snapshot, self.delete_snapshots]

    @activity.defn(name=ActivityName.TAKE_SNAPSHOT)
    async def take_snapshot(self, request: TakeSnapshotInput) -> SnapshotTaken:
        self.takes.append((activity.info().current_attempt_scheduled_time, request))
        box = self._answering(request.sandbox_id)
        if request.number in self.failing:
            return SnapshotTaken(state="failed", pause_seconds=0.5, error="capture failed")
        snap_id = f"snap-{request.number}"
        self.snapshots[snap_id] = box.file
        self.log.append(f"snapshot {box.sandbox_id} as {snap_id}")
        for old in request.delete_ids:
            self.snapshots.pop(old, None)
            self.deleted.append(old)
        return SnapshotTaken(
            state="ready",
            snapshot_id=snap_id,
            size_bytes=GIB,
            pause_seconds=0.5,
            deleted=list(request.delete_ids),
        )

    @activity.defn(name=ActivityName.DELETE_SNAPSHOTS)
    async def delete_snapshots(self, request: DeleteSnapshotsInput) -> SnapshotList:
        for snap_id in request.snapshot_ids:
            self.snapshots.pop(snap_id, None)
            self.deleted.append(snap_id)
        return SnapshotList()

    @activity.defn(name=ActivityName.CREATE_SANDBOX)
    async def create_sandbox(self, request: CreateSandboxInput) -> AgentStarted:
        started = await FakeWorld.create_sandbox(self, request)
        restore = request.restore
        if restore is None or restore.snapshot_id not in self.snapshots:
            return started  # no usable snapshot: from the checkpoint
        box = self._answering(started.sandbox_id)
        box.file = self.snapshots[restore.snapshot_id]
        self.restores.append((request.attempt, restore.snapshot_id))
        return started.model_copy(update={"restored_from": restore.snapshot_id})
