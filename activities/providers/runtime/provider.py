"""The `runtime` provider: sandboxes on Runtime, through the real `withruntime` async client.

Facts of Runtime's API that shape this module:
- `spawn` has no idempotency key, so an agent start first looks for a process carrying the
  same start key (a comment line at the top of the spawned command).
- Reading a file (or running anything) in a paused sandbox wakes it, so every guest call is
  preceded by a state check and refused unless the sandbox is running (or the caller has just
  seen it running: the watch).
- Sandboxes pause at their lease end (`on_lease_end="pause"`, memory and files kept), so the
  last checkpoint can always be salvaged; `wake` carries one on with a fresh lease.
- A command's timeout must fit the lease left (else 409 `lease_too_short`): `run` shortens it
  (see `guest`, the calls inside a sandbox).
- Pause, stop, wake and extend answer with the sandbox, which is what they return here.
- A run's allow-list is the sandbox's network rules, sent with its create (see `network`).
- A run's model key is an egress secret its sandboxes never hold (see `egress_secrets`).
- Watching holds at most `streams` requests per worker, however many runs it watches (see
  `activities.providers.runtime.agent_watch` and `settings`).
- A client's pooled connections belong to the event loop that opened them: one client per
  loop, built on first use in the worker (never at import).
"""

from __future__ import annotations

import asyncio
import math
import os
import weakref
from typing import Any

import withruntime

from activities.models import SandboxInfo
from activities.providers.protocol import (
    ProviderError,
    SandboxNotFound,
    SandboxNotRunning,
    SandboxRequest,
)
from activities.providers.runtime.agent_watch import RuntimeWatching
from activities.providers.runtime.convert import sandbox_info
from activities.providers.runtime.egress_secrets import RuntimeEgressSecrets
from activities.providers.runtime.errors import runtime_call
from activities.providers.runtime.event_feed import EventFeed
from activities.providers.runtime.guest import RuntimeGuest
from activities.providers.runtime.money import RuntimeAccount
from activities.providers.runtime.network import RuntimeNetwork, network_rules
from activities.providers.runtime.request_count import count_requests
from activities.providers.runtime.settings import WatchSettings
from activities.providers.runtime.snapshots import RuntimeSnapshots

API_KEY_VARIABLE = "RUNTIME_API_KEY"
_Client = withruntime.AsyncRuntime
# The SDK keeps 8 of its connections for calls and lets streams (watch streams, and file
# downloads) take the rest: a worker's pool is its watch streams, room for this many downloads
# at once, and those 8.
DOWNLOAD_CONNECTIONS = 8
SDK_KEPT_FOR_CALLS = 8


class RuntimeProvider(
    RuntimeGuest,
    RuntimeWatching,
    RuntimeSnapshots,
    RuntimeAccount,
    RuntimeNetwork,
    RuntimeEgressSecrets,
):
    """`SandboxProvider` on Runtime. The key is read from the worker's `RUNTIME_API_KEY` only.

    The SDK's own retries are kept short on purpose (`max_retries`, `timeout`, no capacity
    wait): its defaults wait minutes inside one activity attempt, invisible to Temporal.
    A failure here is raised quickly as a retryable `ProviderError`, and the activity retry
    policy's backoff (growing to minutes, visible in the UI) absorbs a storm instead.
    """

    def __init__(
        self,
        *,
        timeout_seconds: float = 75,
        max_retries: int = 2,
        call_budget_seconds: float = 180,
        watch_settings: WatchSettings | None = None,
    ) -> None:
        # 75 s per attempt: a pause or stop may be held up to 60 s by `Prefer: wait=60`.
        self._timeout = timeout_seconds
        self._max_retries = max_retries
        self._budget = call_budget_seconds
        # Read here, in the worker (a bad value fails its first Runtime activity, saying why).
        self._settings = watch_settings
        self._streams_held = 0
        self.read_by: dict[str, str] = {}
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Client] = (
            weakref.WeakKeyDictionary()
        )
        self._feeds: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, EventFeed] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def watch_settings(self) -> WatchSettings:
        if self._settings is None:
            self._settings = WatchSettings.from_environment()
        return self._settings

    def _streams_free(self) -> bool:
        return self._streams_held < self.watch_settings.streams

    def _take_stream(self) -> bool:
        """One of this worker's watch streams, if one is free."""
        if not self._streams_free():
            return False
        self._streams_held += 1
        return True

    def _give_stream(self) -> None:
        self._streams_held -= 1

    def _feed(self) -> EventFeed:
        loop = asyncio.get_running_loop()
        feed = self._feeds.get(loop)
        if feed is None:
            feed = self._feeds[loop] = EventFeed(self._client, self.watch_settings.events_seconds)
        return feed

    def _client(self) -> _Client:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            key = os.environ.get(API_KEY_VARIABLE, "").strip()
            if not key:
                # Never fall back to a `runtime login` key saved on the worker's machine.
                raise ProviderError(
                    f"{API_KEY_VARIABLE} is not set in the worker's environment",
                    kind="MissingCredentials",
                    retryable=False,
                )
            try:
                # base_url=None: the SDK reads RUNTIME_API_URL, else Runtime's public API.
                client = withruntime.AsyncRuntime(
                    api_key=key,
                    timeout=self._timeout,
                    max_retries=self._max_retries,
                    wait_for_capacity=0,
                    max_connections=self.watch_settings.streams
                    + DOWNLOAD_CONNECTIONS
                    + SDK_KEPT_FOR_CALLS,
                )
            except ValueError as error:
                raise ProviderError(
                    f"RUNTIME_API_URL is not usable: {error}",
                    kind="RuntimeMisconfigured",
                    retryable=False,
                ) from error
            count_requests(client)
            self._clients[loop] = client
        return client

    async def _get(self, sandbox_id: str) -> withruntime.AsyncSandbox:
        sandbox: withruntime.AsyncSandbox = await self._client().sandboxes.get(sandbox_id)
        return sandbox

    def _handle(self, sandbox_id: str) -> withruntime.AsyncSandbox:
        """A handle on a sandbox without reading it (the SDK's `get` costs a request). Uses the
        client's transport, a private attribute of withruntime 0.35 (pinned in pyproject)."""
        transport = self._client().sandboxes._t
        return withruntime.AsyncSandbox(transport, {"id": sandbox_id})

    async def _running(self, sandbox_id: str) -> withruntime.AsyncSandbox:
        """The sandbox, refused unless running: touching a paused one's guest would wake it."""
        sandbox = await self._get(sandbox_id)
        if sandbox.state != "running":
            raise SandboxNotRunning(sandbox_id, sandbox.state or "unknown")
        return sandbox

    async def get_or_create(self, request: SandboxRequest) -> tuple[SandboxInfo, bool]:
        async with runtime_call(None, self._budget):
            options: dict[str, Any] = {}
            if request.max_total_cost_micros is not None:
                options["max_total_cost_micros"] = max(1, request.max_total_cost_micros)
            if request.snapshot_id is not None:
                options["snapshot"] = request.snapshot_id
            if request.disk_mib is not None:
                options["disk_mib"] = request.disk_mib
            # The run's allow-list, on every create (one from a snapshot too: the docs promise
            # no rules carried over from it).
            rules = network_rules(request.egress)
            if rules is not None:
                options["network"] = rules
            sandbox = await self._client().sandboxes.get_or_create(
                name=request.name,
                labels=request.labels,
                timeout_seconds=max(1, math.ceil(request.timeout_seconds)),
                # The lease end pauses (memory and files kept): nothing written is lost, and
                # with no worker alive the sandbox stops costing compute (a dead man's switch).
                on_lease_end=request.on_lease_end,
                vcpu=request.vcpu,
                memory_mib=request.memory_mib,
                # An agent waiting minutes on its model looks idle; it must never be paused.
                idle_pause_seconds=0,
                # Not waited by the SDK: a reused sandbox that stopped (its time limit passed
                # during an interrupted create) must come back as stopped, not as a retryable
                # `start_failed` that a retry would meet again.
                wait=False,
                **options,
            )
            reused = bool(sandbox.info.get("reused", False))
            if rules is not None and reused and sandbox.state not in ("stopped", "stopping"):
                # A sandbox met by name keeps the rules it was made with (a create's fields
                # apply only when it creates): a worker before this one may have made it open.
                # (`network` is a product the SDK adds at run time, unseen by mypy.)
                await sandbox.network.set(**rules)  # type: ignore[attr-defined]
            if sandbox.state in ("starting", "resuming"):
                await sandbox.wait_for("running", 60)
        return sandbox_info(sandbox.info), not reused

    async def sandbox(self, sandbox_id: str) -> SandboxInfo:
        try:
            async with runtime_call(sandbox_id, self._budget):
                sandbox = await self._get(sandbox_id)
        except SandboxNotFound:
            return SandboxInfo(sandbox_id=sandbox_id, state="missing")
        return sandbox_info(sandbox.info)

    async def wake(self, sandbox_id: str) -> SandboxInfo:
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._get(sandbox_id)
            if sandbox.state in ("paused", "pausing"):
                sandbox = await sandbox.wake()
        return sandbox_info(sandbox.info)

    async def pause(self, sandbox_id: str) -> SandboxInfo:
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._get(sandbox_id)
            if sandbox.state in ("running", "starting", "resuming"):
                sandbox = await sandbox.pause()
        return sandbox_info(sandbox.info)

    async def stop(self, sandbox_id: str) -> SandboxInfo:
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._get(sandbox_id)
            if sandbox.state not in ("stopped", "stopping"):
                sandbox = await sandbox.stop()
        return sandbox_info(sandbox.info)

    async def extend(self, sandbox_id: str, seconds: float) -> SandboxInfo:
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._handle(sandbox_id).extend(max(1, math.floor(seconds)))
        return sandbox_info(sandbox.info)

    async def set_labels(self, sandbox_id: str, labels: dict[str, str]) -> SandboxInfo:
        # `:update` replaces the labels it is given: send them all. Never wakes the sandbox.
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._get(sandbox_id)
            current = dict(sandbox.info.get("labels") or {})
            if all(current.get(k) == v for k, v in labels.items()):
                return sandbox_info(sandbox.info)
            sandbox = await sandbox.update(labels={**current, **labels})
        return sandbox_info(sandbox.info)

    async def set_retention(self, sandbox_id: str, days: int) -> SandboxInfo:
        # One request (`:retention` answers the sandbox); never wakes it.
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._handle(sandbox_id).set_retention(days)
        return sandbox_info(sandbox.info)

    async def list(self, labels: dict[str, str], *, include_stopped: bool) -> list[SandboxInfo]:
        async with runtime_call(None, self._budget):
            page = await self._client().sandboxes.list(
                labels=labels, include_stopped=include_stopped, limit=100
            )
            found = [sandbox_info(sandbox.info) async for sandbox in page]
        if include_stopped:
            return found
        return [info for info in found if info.state != "stopped"]

    async def aclose(self) -> None:
        """Close this loop's client; clients of other (finished) loops go with their loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        feed = self._feeds.pop(loop, None)
        if feed is not None:
            await feed.close()
        client = self._clients.pop(loop, None)
        if client is not None:
            await client.close()
