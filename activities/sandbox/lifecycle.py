"""The sandbox lifecycle activities: pause (and keep for a look until a moment), stop, wake,
extend and list a run's sandboxes, and free what a run kept on a worker beside them (its
session store) once they are done with.

Each answers with the sandbox as it is after the call; a sandbox already gone or stopped is
an answer, not an error (a retried step finds its work done). Each heartbeats when it runs long
(`policies.ACTION_HEARTBEAT`), so a step whose worker died is retried within seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from temporalio import activity

from activities.coding_agent.runtime_model_key import drop_model_key
from activities.coding_agent.setup import session_store
from activities.errors import activity_errors
from activities.heartbeat import heartbeating
from activities.models import (
    ActivityName,
    ExtendSandboxInput,
    ListSandboxesInput,
    RunStoreFreed,
    RunStoreRef,
    SandboxInfo,
    SandboxList,
    SandboxRef,
    SandboxSettled,
)
from activities.providers.local import run_store
from activities.providers.local.disk import TRASH
from activities.providers.money import ensure_daily_room, read_charge
from activities.providers.protocol import (
    KeepsPaused,
    LetsGo,
    SandboxNotFound,
    SandboxNotRunning,
    SandboxProvider,
)
from overnight.core import metrics, retention
from overnight.core.constants import LABEL_KEEP_UNTIL, LABEL_RUN
from overnight.core.home import overnight_home

ProviderGetter = Callable[[str], Awaitable[SandboxProvider]]


class LifecycleActivities:
    def __init__(self, provider: ProviderGetter) -> None:
        self._provider = provider

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.pause_sandbox,
            self.stop_sandbox,
            self.wake_sandbox,
            self.extend_sandbox,
            self.list_sandboxes,
            self.free_run_store,
        ]

    @activity.defn(name=ActivityName.PAUSE_SANDBOX)
    @heartbeating
    async def pause_sandbox(self, input: SandboxRef) -> SandboxSettled:
        provider = await self._provider(input.provider)
        info = await settle(provider, input.sandbox_id, provider.pause(input.sandbox_id))
        if info.state == "paused":
            metrics.count_in_activity(metrics.SANDBOX_ENDS, {"how": "paused"})
        if input.keep_until is not None and info.state == "paused":
            label = {LABEL_KEEP_UNTIL: retention.label_value(input.keep_until)}
            info = await settle(
                provider, input.sandbox_id, provider.set_labels(info.sandbox_id, label)
            )
            if isinstance(provider, KeepsPaused) and info.state == "paused":
                # The provider's own retention too (Runtime's `:retention`): it deletes the
                # sandbox itself even if no `overnight reap` ever runs, never before the label.
                days = retention.provider_days(input.keep_until, info.created_at, _now())
                info = await settle(
                    provider, input.sandbox_id, provider.set_retention(info.sandbox_id, days)
                )
            if isinstance(provider, LetsGo) and info.state == "paused":
                # Kept after its run: no run wakes its agents, so nothing of it stays on the
                # host but its files (a local sandbox's launchers, helpers, mounted image).
                info = await settle(provider, input.sandbox_id, provider.let_go(info.sandbox_id))
        return await _with_charge(provider, info, input.read_charge)

    @activity.defn(name=ActivityName.STOP_SANDBOX)
    @heartbeating
    async def stop_sandbox(self, input: SandboxRef) -> SandboxSettled:
        provider = await self._provider(input.provider)
        info = await settle(provider, input.sandbox_id, provider.stop(input.sandbox_id))
        if info.state == "stopped":
            metrics.count_in_activity(metrics.SANDBOX_ENDS, {"how": "stopped"})
        return await _with_charge(provider, info, input.read_charge)

    @activity.defn(name=ActivityName.WAKE_SANDBOX)
    @heartbeating
    async def wake_sandbox(self, input: SandboxRef) -> SandboxInfo:
        provider = await self._provider(input.provider)
        if input.daily_room_micros is not None:
            with activity_errors():
                now = await provider.sandbox(input.sandbox_id)
                if now.state == "paused":
                    what = "waking the sandbox (a fresh lease)"
                    await ensure_daily_room(provider, input.daily_room_micros, what)
        return await settle(provider, input.sandbox_id, provider.wake(input.sandbox_id))

    @activity.defn(name=ActivityName.EXTEND_SANDBOX)
    @heartbeating
    async def extend_sandbox(self, input: ExtendSandboxInput) -> SandboxInfo:
        provider = await self._provider(input.provider)
        with activity_errors():
            now = await provider.sandbox(input.sandbox_id)
        # A paused sandbox's lease has ended (or someone paused it): moving its end would not
        # wake it, only hide the lease end from the run, which would then take the pause for
        # someone else's and restart a healthy agent (issue #36). The run wakes it instead.
        if now.state != "running" or now.lease_ends_at is None:
            return now
        missing = (input.until - now.lease_ends_at).total_seconds()
        if missing < 1:
            return now  # already that long (a retried extension): nothing to add
        if input.micros_per_second is not None:
            with activity_errors():
                cost = int(missing * input.micros_per_second)
                await ensure_daily_room(provider, cost, f"extending the lease by {missing:.0f} s")
        call = provider.extend(input.sandbox_id, missing)
        extended = await settle(provider, input.sandbox_id, call)
        if extended.state == "paused":
            # The lease ended between the look and the extension, which moved a paused
            # sandbox's end: report the end that paused it.
            return extended.model_copy(update={"lease_ends_at": now.lease_ends_at})
        return extended

    @activity.defn(name=ActivityName.LIST_SANDBOXES)
    @heartbeating
    async def list_sandboxes(self, input: ListSandboxesInput) -> SandboxList:
        provider = await self._provider(input.provider)
        labels = {LABEL_RUN: input.run_id} if input.run_id else {}
        with activity_errors():
            found = await provider.list(labels, include_stopped=input.include_stopped)
        # Without a run id: every sandbox overnight made, and nothing else.
        return SandboxList(sandboxes=[s for s in found if LABEL_RUN in s.labels])

    @activity.defn(name=ActivityName.FREE_RUN_STORE)
    @heartbeating
    async def free_run_store(self, input: RunStoreRef) -> RunStoreFreed:
        """Delete the run's store on this worker (`$OVERNIGHT_HOME/sessions/<run_id>`: a
        coding agent's session store, an image of its own or a folder; run_store.free), at
        the run's end: nothing resumes its session after. Done already: 0 bytes. And erase
        the Runtime egress secret holding its model key, when it names one."""
        home = overnight_home()
        store = session_store(input.run_id, home)
        with activity_errors():
            freed = await asyncio.to_thread(run_store.free, store, home / TRASH)
            if input.egress_secret:  # the run's model key, held by Runtime for its sandboxes
                await drop_model_key(await self._provider(input.provider), input.egress_secret)
        return RunStoreFreed(freed_bytes=freed)


async def settle(
    provider: SandboxProvider, sandbox_id: str, call: Awaitable[SandboxInfo]
) -> SandboxInfo:
    """Run a pause, stop or extend; a missing or already stopped sandbox is not an error."""
    with activity_errors():
        try:
            info = await call
        except SandboxNotFound:
            return SandboxInfo(sandbox_id=sandbox_id, state="missing")
        except SandboxNotRunning:
            return await provider.sandbox(sandbox_id)
    return info


async def _with_charge(provider: SandboxProvider, info: SandboxInfo, read: bool) -> SandboxSettled:
    charge = await read_charge(provider, info.sandbox_id) if read else None
    return SandboxSettled(**info.model_dump(), charge=charge)


def _now() -> datetime:
    return datetime.now(UTC)
