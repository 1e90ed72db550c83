"""Runtime snapshots through the `withruntime` async client (reference section 6).

The source is paused by the caller (`take_snapshot`) before `sandbox.snapshot(...)` is asked,
so the SDK leaves it paused until the snapshot is `ready` or `failed` and the activity wakes
it; `runtime.snapshots.get/list/delete` do the rest. Listing pages through every snapshot of
the account (the SDK filters by name, sandbox or state, not labels) and keeps those whose
labels match.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import withruntime

from activities.providers.protocol import ProviderError
from activities.providers.runtime.errors import runtime_call
from activities.providers.snapshot_protocol import SnapshotInfo, SnapshotState

# A capture may take minutes for a large sandbox; the SDK's own deadline is ten.
CAPTURE_SECONDS = 600
_STATES = {"capturing": "capturing", "ready": "ready", "failed": "failed", "deleted": "missing"}


def snapshot_info(body: dict[str, Any]) -> SnapshotInfo:
    created = body.get("createdAt")
    size = body.get("sizeBytes", body.get("size"))
    return SnapshotInfo(
        snapshot_id=str(body["id"]),
        state=cast(SnapshotState, _STATES.get(str(body.get("state")), "failed")),
        name=str(body.get("name") or ""),
        mode=str(body.get("mode") or "memory"),
        labels=dict(body.get("labels") or {}),
        size_bytes=int(size)
        if isinstance(size, (int, float, str)) and str(size).isdigit()
        else None,
        created_at=datetime.fromisoformat(created) if isinstance(created, str) else None,
        source_sandbox_id=body.get("sourceSandboxId"),
        error=body.get("error") if isinstance(body.get("error"), str) else None,
    )


class RuntimeSnapshots:
    """Mixed into `RuntimeProvider` (which supplies `_client`, `_get` and `_budget`)."""

    _budget: float

    if TYPE_CHECKING:

        def _client(self) -> withruntime.AsyncRuntime: ...

        async def _get(self, sandbox_id: str) -> withruntime.AsyncSandbox: ...

    async def snapshot(
        self,
        sandbox_id: str,
        *,
        name: str,
        mode: str,
        labels: dict[str, str],
        retention_days: int,
    ) -> SnapshotInfo:
        for found in await self.list_snapshots(labels):
            if found.name == name and found.state == "ready":
                return found  # a retried capture: taken already
        async with runtime_call(sandbox_id, self._budget + CAPTURE_SECONDS):
            sandbox = await self._get(sandbox_id)
            if sandbox.state not in ("paused", "pausing"):
                raise ProviderError(
                    f"sandbox {sandbox_id} is {sandbox.state}: a snapshot needs it paused",
                    kind="SandboxNotPaused",
                    retryable=False,
                )
            try:
                body = await sandbox.snapshot(
                    name=name,
                    labels=labels,
                    retention_days=retention_days,
                    mode=mode,
                    timeout_seconds=CAPTURE_SECONDS,
                )
            except withruntime.RuntimeError as error:
                if getattr(error, "code", None) != "snapshot_failed":
                    raise
                return SnapshotInfo(snapshot_id="", state="failed", name=name, error=str(error))
        return snapshot_info(body)

    async def snapshot_info(self, snapshot_id: str) -> SnapshotInfo:
        try:
            async with runtime_call(None, self._budget):
                body = await self._client().snapshots.get(snapshot_id)
        except ProviderError as error:
            if not _not_found(error):
                raise
            return SnapshotInfo(snapshot_id=snapshot_id, state="missing")
        return snapshot_info(body)

    async def delete_snapshot(self, snapshot_id: str) -> None:
        try:
            async with runtime_call(None, self._budget):
                await self._client().snapshots.delete(snapshot_id)
        except ProviderError as error:
            if not _not_found(error):
                raise

    async def list_snapshots(self, labels: dict[str, str]) -> list[SnapshotInfo]:
        found: list[SnapshotInfo] = []
        async with runtime_call(None, self._budget):
            page = await self._client().snapshots.list()
            async for body in page:
                info = snapshot_info(body)
                if info.state != "missing" and all(
                    info.labels.get(k) == v for k, v in labels.items()
                ):
                    found.append(info)
        return found


def _not_found(error: ProviderError) -> bool:
    return error.kind in ("NotFound", "SandboxNotFound")
