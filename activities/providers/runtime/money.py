"""What Runtime charged, and the key's daily spending limit (`GET /v1/usage`, `GET /v1/limits`).

Both answers are about the whole key or account, not one sandbox, so one read serves every run
a worker watches: a read less than `SHARED_READ_SECONDS` old is answered again (concurrent
callers share one request), unless the caller needs it `fresh` (a sandbox's end; the check
before a create, wake or extension). A worker watching N runs so spends at most one of each
per four minutes on them, whatever N: a figure is then at most that old, and the money held
for a running sandbox's lease covers the minutes since. `GET /v1/usage` lists only the newest
hundred resources: an older sandbox is simply not found, and the run keeps its estimate for it.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from activities.models import DailyLimitRead, SandboxCharge
from activities.providers.runtime.errors import runtime_call

if TYPE_CHECKING:
    import withruntime

SHARED_READ_SECONDS = 240.0


class _SharedRead:
    """One answer shared by callers within `max_age` seconds, and one request at a time."""

    def __init__(self) -> None:
        self._at = -1e18
        self._value: dict[str, Any] | None = None
        self._lock: asyncio.Lock | None = None

    async def get(self, read: Any, *, max_age: float) -> dict[str, Any]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        asked_at = time.monotonic()
        async with self._lock:
            # Another caller may have read it while this one waited: that answer is new enough.
            if self._value is not None and self._at >= asked_at - max_age:
                return self._value
            value = await read()
            self._value, self._at = (value if isinstance(value, dict) else {}), time.monotonic()
            return self._value


class RuntimeAccount:
    """Mixed into `RuntimeProvider` (which supplies `_client` and `_budget`)."""

    _budget: float

    if TYPE_CHECKING:

        def _client(self) -> withruntime.AsyncRuntime: ...

    _usage: _SharedRead | None = None
    _limits: _SharedRead | None = None

    async def charges(self, sandbox_ids: list[str], *, fresh: bool) -> dict[str, SandboxCharge]:
        if self._usage is None:
            self._usage = _SharedRead()
        async with runtime_call(None, self._budget):
            usage = await self._usage.get(
                self._client().usage, max_age=0.0 if fresh else SHARED_READ_SECONDS
            )
            # Parsed inside: a malformed figure is a bad answer from Runtime, not a crash.
            wanted = set(sandbox_ids)
            found: dict[str, SandboxCharge] = {}
            for resource in usage.get("resources") or []:
                if isinstance(resource, dict) and resource.get("resourceId") in wanted:
                    charge = charge_of(resource)
                    found[charge.sandbox_id] = charge
        return found

    async def daily_limit(self, *, fresh: bool) -> DailyLimitRead:
        if self._limits is None:
            self._limits = _SharedRead()
        client = self._client()
        async with runtime_call(None, self._budget):
            limits = await self._limits.get(
                client.limits.get, max_age=0.0 if fresh else SHARED_READ_SECONDS
            )
            return daily_of(limits.get("daily"))


def charge_of(resource: dict[str, Any]) -> SandboxCharge:
    return SandboxCharge(
        sandbox_id=str(resource["resourceId"]),
        charged_micros=_micros(resource.get("chargedMicros")) or 0,
        held_micros=_micros(resource.get("heldMicros")) or 0,
        running_seconds=float(resource.get("runningSeconds") or 0),
    )


def daily_of(daily: Any) -> DailyLimitRead:
    """`daily` of `GET /v1/limits`; null (no limit set) reads as no limit."""
    if not isinstance(daily, dict):
        return DailyLimitRead()
    return DailyLimitRead(
        limit_micros=_micros(daily.get("limitMicros")),
        used_micros=_micros(daily.get("usedMicros")) or 0,
        remaining_micros=_micros(daily.get("remainingMicros")),
    )


def _micros(value: Any) -> int | None:
    """Money is integer microdollars sent as strings (exact however large)."""
    if value is None:
        return None
    return int(str(value))
