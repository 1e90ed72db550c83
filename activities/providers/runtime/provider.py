"""The `runtime` provider: sandboxes on Runtime, through the real `withruntime` async client.

Facts of Runtime's API that shape this module:
- `spawn` has no idempotency key, so an agent start first looks for a process carrying the
  same start key (a comment line at the top of the spawned command).
- Reading a file (or running anything) in a paused sandbox wakes it, so every guest call is
  preceded by a state check and refused unless the sandbox is running (or the caller has just
  seen it running: the watch).
- Sandboxes pause at their lease end (`on_lease_end="pause"`, memory and files kept), so the
  last checkpoint can always be salvaged; `wake` carries one on with a fresh lease.
- A command's timeout must fit the lease left (else 409 `lease_too_short`): `run` shortens it.
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
import re
import weakref
from typing import Any

import withruntime

from activities.models import SandboxInfo
from activities.providers.protocol import (
    AgentLaunch,
    CommandOutput,
    FileRead,
    ProcessInfo,
    ProviderError,
    SandboxNotFound,
    SandboxNotRunning,
    SandboxRequest,
)
from activities.providers.runtime import watch_stream
from activities.providers.runtime.agent_watch import RuntimeWatching
from activities.providers.runtime.convert import (
    in_workspace,
    lease_left,
    process_info,
    sandbox_info,
    start_marker,
)
from activities.providers.runtime.egress_secrets import RuntimeEgressSecrets
from activities.providers.runtime.errors import runtime_call
from activities.providers.runtime.event_feed import EventFeed
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
# A command is given at most the lease left minus this, so it never outlasts the lease.
LEASE_SAFETY_SECONDS = 10


class RuntimeProvider(
    RuntimeWatching, RuntimeSnapshots, RuntimeAccount, RuntimeNetwork, RuntimeEgressSecrets
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

    async def run(
        self, sandbox_id: str, command: str, *, cwd: str | None = None, timeout_seconds: float = 600
    ) -> CommandOutput:
        async with runtime_call(sandbox_id, self._budget + timeout_seconds):
            sandbox = await self._running(sandbox_id)
            # Runtime refuses a command that would outlast the lease (409 lease_too_short).
            left = lease_left(sandbox.info)
            if left is not None:
                if left - LEASE_SAFETY_SECONDS < 1:
                    raise ProviderError(
                        f"sandbox {sandbox_id} has {left:.0f} s of lease left: too little to "
                        "run a command",
                        kind="LeaseTooShort",
                    )
                timeout_seconds = min(timeout_seconds, left - LEASE_SAFETY_SECONDS)
            # Over 60 s the SDK streams the output (NDJSON) instead of one JSON answer.
            result = await sandbox.exec(
                command, cwd=cwd, timeout_ms=max(1, math.ceil(timeout_seconds * 1000))
            )
        return CommandOutput(
            exit_code=result.exit_code,
            stdout=result.stdout,
            stderr=result.stderr,
            timed_out=result.timed_out,
        )

    async def start_agent(self, sandbox_id: str, launch: AgentLaunch) -> ProcessInfo:
        marker = start_marker(launch.start_key)
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._running(sandbox_id)
            existing = _tagged(await sandbox.processes(), launch.start_key)
            if existing is not None:
                return process_info(existing)
            command = launch.command
            if launch.exit_marker is not None:
                command = watch_stream.wrap_with_exit_marker(command, launch.exit_marker)
            # Secrets travel only here, in this one spawn's environment.
            process = await sandbox.spawn(
                f"{marker}\n{command}", cwd=launch.cwd, env=dict(launch.env)
            )
        return process_info(process.info)

    async def find_agent(self, sandbox_id: str, start_key: str) -> ProcessInfo | None:
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._running(sandbox_id)
            existing = _tagged(await sandbox.processes(), start_key)
        return None if existing is None else process_info(existing)

    async def process(self, sandbox_id: str, process_id: str) -> ProcessInfo:
        try:
            async with runtime_call(sandbox_id, self._budget):
                sandbox = await self._get(sandbox_id)
                if sandbox.state in ("paused", "pausing"):
                    # Frozen with its sandbox; not asked of the guest, which would wake it.
                    return ProcessInfo(process_id=process_id, state="running")
                try:
                    process = await sandbox.process(process_id)
                except (withruntime.NotFoundError, withruntime.ConflictError):
                    ended = sandbox.state in ("stopped", "stopping")
                    return ProcessInfo(
                        process_id=process_id, state="killed" if ended else "missing"
                    )
        except SandboxNotFound:
            return ProcessInfo(process_id=process_id, state="missing")
        return process_info(process.info)

    async def read_file(
        self, sandbox_id: str, path: str, max_bytes: int, *, seen_running: bool = False
    ) -> FileRead:
        """One request when `seen_running` (the caller has just watched it run), else two: the
        state is checked first, because a read would wake a paused sandbox. The download is
        streamed and given up past `max_bytes`, so an oversized file costs little."""
        if not in_workspace(path):
            return FileRead(status="outside")
        async with runtime_call(sandbox_id, self._budget):
            sandbox = self._handle(sandbox_id) if seen_running else await self._running(sandbox_id)
            try:
                return await _capped_read(sandbox, path, max_bytes)
            except withruntime.NotFoundError:
                return FileRead(status="missing")
            except withruntime.ConflictError as error:
                if error.code == "is_a_directory":
                    return FileRead(status="missing")
                raise
            except withruntime.PermissionDeniedError:
                # A path the sandbox refuses to serve (a link leading out of /workspace).
                return FileRead(status="outside")

    async def write_file(self, sandbox_id: str, path: str, data: bytes) -> None:
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._running(sandbox_id)
            await sandbox.files.write(path, data)

    async def upload_dir(self, sandbox_id: str, local_dir: str, remote_dir: str) -> None:
        async with runtime_call(sandbox_id, self._budget):
            sandbox = await self._running(sandbox_id)
            await sandbox.files.upload(local_dir, remote_dir)

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


async def _capped_read(sandbox: withruntime.AsyncSandbox, path: str, max_bytes: int) -> FileRead:
    pieces: list[bytes] = []
    size = 0
    async for piece in sandbox.files.read_stream(path):
        pieces.append(piece)
        size += len(piece)
        if size > max_bytes:
            # Refused once past the cap: the rest of an oversized file is never downloaded.
            # One size for every oversized version, so the refusal is news only once.
            return FileRead(status="too_large", size=max_bytes + 1)
    data = b"".join(pieces)
    return FileRead(status="ok", size=len(data), data=data)


def _tagged(processes: list[dict[str, Any]], start_key: str) -> dict[str, Any] | None:
    """The process whose command carries `start_key`'s marker: the whole key, not a prefix of
    a longer one ("...-1" must not match "...-10")."""
    tagged = re.compile(re.escape(start_marker(start_key)) + r"(?![A-Za-z0-9_.:-])")
    for existing in processes:
        if tagged.search(str(existing.get("command") or "")):
            return existing
    return None
