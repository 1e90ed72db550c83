"""The fake's own book of sandboxes: names, lease settings and wakes, over the engine's.

Runtime keeps things the local engine does not, so the fake keeps them here:
- a name table: a name belongs to a sandbox while it can still run (a stopped one gives it
  up), so each create makes an engine sandbox with an id of its own (`<name>-<hex>`);
- what was asked at create (`timeoutSeconds`, `onLeaseEnd`, `autoWake`, sizes, its network
  rules, ...);
- wakes: a paused sandbox woken by a request or `:wake` runs again with a fresh lease;
- money (`money.Billing`): every look at a sandbox meters its running time, and what would
  commit money (`spend`: a create, wake or extension) is first held to the account's limits.
The engine stays the truth for states, lease ends (it pauses or stops a sandbox at its lease
end, stopReason "lease_expired"), processes and files; `LocalEngine.set_lease_end` is how a
test lets time pass.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from activities.models import SandboxInfo
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import ProviderError, SandboxNotFound, SandboxProvider
from fakes.runtime.events import EventLog
from fakes.runtime.money import MAX_HOLD_MS, Billing
from fakes.runtime.network_rules import NetworkRules
from fakes.runtime.rules import Rules

# The lease given to the engine when leases are switched off (`Rules.leases_end=False`).
ENDLESS_LEASE_SECONDS = 365 * 24 * 3600.0
_ID_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$")
# Create fields shown back in the sandbox object (never env, secrets or credentials).
SHOWN_FIELDS = (
    "idlePauseSeconds",
    "maxCostMicros",
    "persistent",
    "image",
    "region",
    "pausable",
    "user",
    "diskMiB",
    "cpu",
    "cpuFloorMillis",
    "funding",
    "snapshot",
)


@dataclass
class Record:
    """What the fake knows of one sandbox beyond the engine. Times are Unix seconds."""

    id: str
    name: str | None
    labels: dict[str, str]
    created_at: float
    timeout_seconds: float | None  # the lease a wake grants; None: no time limit
    on_lease_end: str = "pause"
    auto_wake: bool = True
    vcpu: int = 2
    memory_mib: int = 4096
    max_total_cost_micros: int | None = None
    shown: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    deleted: bool = False
    # `:retention`: while paused, kept until then (Unix seconds), then deleted, as Runtime
    # deletes a paused sandbox whose retention days have passed. None: not set.
    kept_until: float | None = None
    retention_days: int | None = None
    # Its network rules (`network`, `PUT .../network`); a create without them: the public web.
    network: NetworkRules = field(default_factory=NetworkRules)


def new_id(name: str | None) -> str:
    """An engine id for a new sandbox: its name and a suffix, or `sbx-<hex>`."""
    suffix = uuid.uuid4().hex[:8]
    if name and _ID_SAFE.match(name):
        return f"{name}-{suffix}"
    return f"sbx-{uuid.uuid4().hex[:12]}"


def iso(seconds: float | None) -> str | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat()


def lease_left(info: SandboxInfo) -> float | None:
    """Seconds left of the sandbox's lease (None: no time limit)."""
    ends = info.lease_ends_at
    return None if ends is None else (ends - datetime.now(UTC)).total_seconds()


class Sandboxes:
    """Records by id, the name table and the wake log."""

    def __init__(
        self,
        engine: SandboxProvider,
        rules: Rules,
        wake_engine: Callable[[str], Awaitable[None]] | None = None,
        billing: Billing | None = None,
    ) -> None:
        self.engine = engine
        self.rules = rules
        self.billing = billing or Billing()
        self._wake_engine = wake_engine
        self.lock = threading.Lock()  # guards what tests read from their own thread
        self.records: dict[str, Record] = {}
        self.names: dict[str, str] = {}
        # (sandbox id, what woke it, the API key of the request that did, if one did)
        self.woken: list[tuple[str, str, str | None]] = []
        # The account's events (`GET /v1/events`): each look notes a change of state.
        self.events = EventLog()
        self.create_lock = asyncio.Lock()

    # --- looking up ---

    async def get(self, sandbox_id: str) -> tuple[Record, SandboxInfo]:
        """The sandbox's record and engine state; SandboxNotFound if absent or deleted."""
        try:
            info = await self.engine.sandbox(sandbox_id)
        except ProviderError as error:
            if error.kind == "InvalidRequest":  # not even a possible id
                raise SandboxNotFound(sandbox_id) from None
            raise
        record = self.records.get(sandbox_id)
        if info.state == "missing" or (record is not None and record.deleted):
            raise SandboxNotFound(sandbox_id)
        if record is None:
            record = self._adopt(info)
        if info.state == "paused" and record.kept_until is not None:
            if time.time() >= record.kept_until:
                # Its retention passed while paused: Runtime deletes it.
                self.observe(record, await self.engine.stop(record.id))
                record.deleted = True
                raise SandboxNotFound(sandbox_id)
        self.observe(record, info)
        self.json(record, info)  # a look: notes a change of state as an event
        return record, info

    def observe(self, record: Record, info: SandboxInfo) -> None:
        """Meter the sandbox as it is now (it runs, or no longer does)."""
        self.billing.observe(
            record.id,
            info.state,
            info.lease_ends_at,
            name=record.name,
            created_at=record.created_at,
            vcpu=record.vcpu,
            memory_mib=record.memory_mib,
        )

    async def look_at(self, sandbox_ids: list[str]) -> None:
        """Look at these sandboxes (so the meters see lease ends that passed)."""
        for sandbox_id in sandbox_ids:
            record = self.records.get(sandbox_id)
            if record is not None and record.deleted:
                continue
            try:
                await self.get(sandbox_id)
            except SandboxNotFound:
                pass

    async def spend(self, vcpu: int, memory_mib: int, seconds: float | None, what: str) -> None:
        """Refuse (money.SpendingRefused, a 402) what would commit `seconds` of a sandbox of
        this size past the trial, the daily limit or the credit (`Rules.spending_limits`)."""
        if not self.rules.spending_limits or not self.billing.needs_checking():
            return
        await self.look_at(self.billing.running_ids())
        seconds = min(seconds or 0.0, MAX_HOLD_MS / 1000)
        self.billing.require(self.billing.sandbox_cost(vcpu, memory_mib, seconds), what)

    def _adopt(self, info: SandboxInfo) -> Record:
        """A sandbox made in the engine behind the fake's back: known from now on."""
        record = Record(
            id=info.sandbox_id,
            name=info.name or info.sandbox_id,
            labels=dict(info.labels),
            created_at=info.created_at.timestamp() if info.created_at else time.time(),
            timeout_seconds=None,
        )
        with self.lock:
            self.records[record.id] = record
            self.names.setdefault(record.name or record.id, record.id)
        return record

    async def holder(self, name: str) -> tuple[Record, SandboxInfo] | None:
        """The sandbox holding `name`, if it can still run (or keeps it while stopped)."""
        sandbox_id = self.names.get(name)
        if sandbox_id is None:
            return None
        try:
            record, info = await self.get(sandbox_id)
        except SandboxNotFound:
            info = None
        if info is not None and (
            info.state != "stopped"
            or record.shown.get("persistent") is True
            or not self.rules.release_names_on_stop
        ):
            return record, info
        with self.lock:
            self.names.pop(name, None)
        return None

    def add(self, record: Record) -> None:
        with self.lock:
            self.records[record.id] = record
            if record.name:
                self.names[record.name] = record.id

    def json(self, record: Record, info: SandboxInfo, **extra: Any) -> dict[str, Any]:
        """The sandbox's API object; each one made is a look that notes a change of state as
        an event (`events.EventLog`)."""
        stopped = info.state == "stopped"
        timeout = record.timeout_seconds
        shown = {
            "id": record.id,
            "state": info.state,
            "name": record.name,
            "labels": dict(info.labels),
            "createdAt": iso(record.created_at),
            "timeoutSeconds": int(timeout) if timeout is not None and timeout % 1 == 0 else timeout,
            "endsAt": info.lease_ends_at.isoformat() if info.lease_ends_at else None,
            "onLeaseEnd": record.on_lease_end,
            "autoWake": record.auto_wake,
            "vcpu": record.vcpu,
            "memoryMiB": record.memory_mib,
            "stopReason": (record.stop_reason or info.stop_reason) if stopped else None,
            "maxTotalCostMicros": record.max_total_cost_micros,
            **record.shown,
            **extra,
        }
        self.events.sandbox_seen(shown)
        return shown

    # --- wakes ---

    @property
    def wakes(self) -> list[tuple[str, str]]:
        """(sandbox id, what woke it) for each wake, oldest first."""
        return [(sandbox_id, why) for sandbox_id, why, _ in self.woken]

    async def wake(
        self, record: Record, why: str, timeout: float | None = None, *, key: str | None = None
    ) -> SandboxInfo:
        """Carry a paused sandbox on with a fresh lease: `timeout` (else its own) from now, or
        the lease it paused with if that ends later. Its fresh lease must be affordable."""
        lease = timeout if timeout is not None else record.timeout_seconds
        await self.spend(record.vcpu, record.memory_mib, lease, f"Waking {record.id}")
        with self.lock:
            self.woken.append((record.id, why, key))
        if timeout is not None:
            record.timeout_seconds = timeout
        if self._wake_engine is not None:
            await self._wake_engine(record.id)
        elif isinstance(self.engine, LocalProvider):
            lease = timeout if self.rules.leases_end else ENDLESS_LEASE_SECONDS
            await self.engine.wake(record.id, lease)
        else:
            await self.engine.wake(record.id)
        return (await self.get(record.id))[1]
