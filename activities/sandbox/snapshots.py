"""Snapshot recovery's activities: take a snapshot at a safe point, delete and list them, and
the restore half of `create_sandbox`.

A capture holds the sandbox paused from before the snapshot is asked for until it is `ready`
or `failed` (Runtime's rule), then wakes it and answers the agent's request in
`SNAPSHOT_ANSWER`. A failed capture comes back as `state="failed"`, never as an error that
could end the attempt: the workflow logs it and tries again later.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from temporalio import activity

from activities.errors import ErrorType, activity_errors, non_retryable
from activities.heartbeat import auto_heartbeat
from activities.models import (
    ActivityName,
    DeleteSnapshotsInput,
    ListSnapshotsInput,
    SandboxInfo,
    SnapshotList,
    SnapshotRestore,
    SnapshotSummary,
    SnapshotTaken,
    TakeSnapshotInput,
)
from activities.providers.protocol import AgentLaunch, ProcessInfo, ProviderError, SandboxProvider
from activities.providers.protocol import SandboxRequest as Request
from activities.providers.registry import supports_snapshots
from activities.providers.snapshot_protocol import SnapshotProvider
from overnight.core.constants import LABEL_RUN, LABEL_SNAPSHOT, SNAPSHOT_ANSWER

ProviderGetter = Callable[[str], Awaitable[SandboxProvider]]
logger = logging.getLogger(__name__)


def snapshots_of(provider: SandboxProvider) -> SnapshotProvider:
    if not supports_snapshots(provider):
        raise non_retryable(ErrorType.INVALID_REQUEST, "this provider offers no snapshots")
    return provider


def snapshot_name(run_id: str, number: int) -> str:
    return f"{run_id}-snap-{number}"


async def answer_request(
    provider: SandboxProvider, sandbox_id: str, request: int, state: str, snapshot_id: str | None
) -> None:
    """Tell an agent waiting in `snapshot_here()` that its snapshot is taken (or failed).

    The provider writes it through no symlink (the local one with openat and O_NOFOLLOW). An
    agent that made the answer's folder something else (a link out of its workspace) is not
    answered: that is logged, and the snapshot it asked for still counts."""
    answer = {"request": request, "state": state, "snapshot_id": snapshot_id}
    try:
        await provider.write_file(sandbox_id, SNAPSHOT_ANSWER, json.dumps(answer).encode())
    except ProviderError as error:
        if error.retryable:
            raise
        logger.warning("snapshot request %d in %s not answered: %s", request, sandbox_id, error)


class SnapshotActivities:
    def __init__(self, provider: ProviderGetter, heartbeat_seconds: float | None = None):
        self._provider = provider
        self._heartbeat_seconds = heartbeat_seconds

    def all(self) -> list[Callable[..., Any]]:
        return [self.take_snapshot, self.delete_snapshots, self.list_snapshots]

    @activity.defn(name=ActivityName.TAKE_SNAPSHOT)
    async def take_snapshot(self, input: TakeSnapshotInput) -> SnapshotTaken:
        provider = await self._provider(input.provider)
        snaps = snapshots_of(provider)
        labels = {LABEL_RUN: input.run_id, LABEL_SNAPSHOT: str(input.number)}
        async with auto_heartbeat(self._heartbeat_seconds):
            with activity_errors():
                before = await provider.sandbox(input.sandbox_id)
                if before.state not in ("running", "paused"):
                    return SnapshotTaken(state="failed", error=f"sandbox is {before.state}")
                paused_at = time.monotonic()
                if before.state == "running":
                    await provider.pause(input.sandbox_id)
                try:
                    taken = await snaps.snapshot(
                        input.sandbox_id,
                        name=snapshot_name(input.run_id, input.number),
                        mode=input.mode,
                        labels=labels,
                        retention_days=input.retention_days,
                    )
                    error = taken.error
                except ProviderError as failed:
                    if failed.retryable:
                        raise
                    taken, error = None, str(failed)
                finally:
                    # Held paused until the snapshot is ready or failed, then carried on. Always
                    # woken: the workflow captures running sandboxes only, and a retried capture
                    # whose first try paused it finds it paused.
                    await provider.wake(input.sandbox_id)
                held = time.monotonic() - paused_at
                ready = taken is not None and taken.state == "ready"
                snap_id = None if taken is None else taken.snapshot_id
                if input.request:
                    state = "ready" if ready else "failed"
                    await answer_request(provider, input.sandbox_id, input.request, state, snap_id)
                deleted: list[str] = []
                if ready:
                    for old in input.delete_ids:
                        await snaps.delete_snapshot(old)
                        deleted.append(old)
        if not ready:
            why = error or f"snapshot ended {taken.state if taken else 'failed'}"
            return SnapshotTaken(state="failed", snapshot_id=snap_id, pause_seconds=held, error=why)
        assert taken is not None
        return SnapshotTaken(
            state="ready",
            snapshot_id=taken.snapshot_id,
            size_bytes=taken.size_bytes,
            pause_seconds=round(held, 3),
            deleted=deleted,
        )

    @activity.defn(name=ActivityName.DELETE_SNAPSHOTS)
    async def delete_snapshots(self, input: DeleteSnapshotsInput) -> SnapshotList:
        provider = await self._provider(input.provider)
        snaps = snapshots_of(provider)
        with activity_errors():
            for snap_id in input.snapshot_ids:
                await snaps.delete_snapshot(snap_id)
        return SnapshotList()

    @activity.defn(name=ActivityName.LIST_SNAPSHOTS)
    async def list_snapshots(self, input: ListSnapshotsInput) -> SnapshotList:
        provider = await self._provider(input.provider)
        snaps = snapshots_of(provider)
        labels = {LABEL_RUN: input.run_id} if input.run_id else {}
        with activity_errors():
            found = await snaps.list_snapshots(labels)
        return SnapshotList(
            snapshots=[
                SnapshotSummary(
                    snapshot_id=f.snapshot_id,
                    state=f.state,
                    run_id=f.labels.get(LABEL_RUN),
                    size_bytes=f.size_bytes,
                    created_at=f.created_at,
                )
                for f in found
                if LABEL_RUN in f.labels
            ]
        )


async def usable_restore(
    provider: SandboxProvider, request: Request, restore: SnapshotRestore | None
) -> Request:
    """The create request made from the snapshot if it is still ready; else unchanged (this
    restart then recovers from the checkpoint)."""
    if restore is None or not supports_snapshots(provider):
        return request
    info = await provider.snapshot_info(restore.snapshot_id)
    if info.state != "ready":
        activity.logger.warning(
            "snapshot %s is %s: recovering from the checkpoint", restore.snapshot_id, info.state
        )
        return request
    return replace(request, snapshot_id=restore.snapshot_id)


async def start_restored(
    provider: SandboxProvider, sandbox: SandboxInfo, restore: SnapshotRestore, launch: AgentLaunch
) -> tuple[ProcessInfo, bool]:
    """In a sandbox made from a snapshot: answer the request the snapshot held, then adopt the
    agent captured running (memory mode, found by its start key) or start it on the
    checkpoint the snapshot held. True when adopted."""
    sid = sandbox.sandbox_id
    if restore.request:
        await answer_request(provider, sid, restore.request, "ready", restore.snapshot_id)
    if restore.mode == "memory" and restore.adopt_start_key and supports_snapshots(provider):
        # Only look: starting it by its old key would report a fresh start as adopted.
        found = await provider.find_agent(sid, restore.adopt_start_key)
        if found is not None and found.state == "running":
            return found, True
    return await provider.start_agent(sid, launch), False
