"""Local sandboxes on many hosts (workflows.pure.hosts), on the time-skipping server: every step on
a sandbox goes to its host's queue; a host whose queue has had no poller for its lost
threshold costs one restart (`host lost`), and a host back before it costs nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import Worker

from activities.models import (
    ActivityName,
    AgentStarted,
    CreateSandboxInput,
    Observation,
    ObserveInput,
    SandboxRef,
    SandboxSettled,
    SpecCheck,
    SpecCheckInput,
)
from activities.models.host import HostCheckInput, HostSeen
from fakes.activities import FakeWorld, exits, note, progress
from overnight.core.models import RunResult, RunStatus
from tests.workflows.harness import Handle, make_spec, running_worker, status_of

# Short: the test server does not skip the time a step waits unstarted.
LOST_AFTER = 6.0


class HostWorld(FakeWorld):
    """A FakeWorld whose sandbox `attempt` is made on host `hosts[attempt]`, and which says
    what the server says of host queues (none is polled, unless `polled_since` is set)."""

    def __init__(self, hosts: dict[int, str]) -> None:
        super().__init__()
        self.hosts = hosts
        self.queues: list[tuple[str, str]] = []  # (activity, task queue)
        self.checks: list[str] = []
        # While set, a check waits on it (real time: the test's clock stands still meanwhile).
        self.check_gate: asyncio.Event | None = None

    def activities(self) -> list[Any]:
        return [*super().activities(), self.check_host]

    def _ran(self, name: str) -> None:
        self.queues.append((name, activity.info().task_queue))

    @activity.defn(name=ActivityName.CREATE_SANDBOX)
    async def create_sandbox(self, request: CreateSandboxInput) -> AgentStarted:
        self._ran("create")
        assert request.wants_host
        started = await FakeWorld.create_sandbox(self, request)
        here = activity.info().task_queue  # a pinned create is sent to its host's own queue
        queue = here if "@" in here else f"{here}@{self.hosts[request.attempt]}"
        return started.model_copy(update={"host_queue": queue, "host_lost_seconds": LOST_AFTER})

    @activity.defn(name=ActivityName.OBSERVE_AGENT)
    async def observe_agent(self, request: ObserveInput) -> Observation:
        self._ran("observe")
        return await FakeWorld.observe_agent(self, request)

    @activity.defn(name=ActivityName.STOP_SANDBOX)
    async def stop_sandbox(self, request: SandboxRef) -> SandboxSettled:
        self._ran("stop")
        return await FakeWorld.stop_sandbox(self, request)  # type: ignore[return-value]

    @activity.defn(name=ActivityName.CHECK_SPEC)
    async def check_spec(self, request: SpecCheckInput) -> SpecCheck:
        checked = await FakeWorld.check_spec(self, request)
        lost_after = LOST_AFTER if request.spec.hosts else None
        return checked.model_copy(update={"host_lost_seconds": lost_after})

    @activity.defn(name=ActivityName.CHECK_HOST)
    async def check_host(self, input: HostCheckInput) -> HostSeen:
        self.checks.append(input.host_queue)
        if self.check_gate is not None:
            await self.check_gate.wait()
        return HostSeen(
            host_queue=input.host_queue,
            lost_after_seconds=LOST_AFTER,
            checked_at=datetime.now(UTC),
        )


@asynccontextmanager
async def run_on_hosts(
    client: Client, world: HostWorld, live: list[str], **spec_changes: Any
) -> AsyncIterator[tuple[Handle, str]]:
    """The run's worker, one worker per host in `live`, and the run started."""
    spec = make_spec(poll_seconds=1, stall_seconds=600, **spec_changes)
    async with running_worker(client, world) as queue, asyncio.TaskGroup() as group:
        stop = asyncio.Event()
        for host in live:
            group.create_task(_host_worker(client, world, f"{queue}@{host}", stop))
        handle: Handle = await client.start_workflow(
            "AgentRun", spec, id=spec.run_id, task_queue=queue, result_type=RunResult
        )
        try:
            yield handle, queue
        finally:
            stop.set()
            with contextlib.suppress(RPCError):
                await handle.terminate(reason="test over")


async def _host_worker(client: Client, world: HostWorld, queue: str, stop: asyncio.Event) -> None:
    async with Worker(client, task_queue=queue, activities=world.activities()):
        await stop.wait()


async def test_every_step_on_a_sandbox_goes_to_the_queue_of_its_host(client: Client) -> None:
    world = HostWorld({1: "host-a"})
    world.script(1, [progress(note("step 2", "step 1 done")), exits(0, final=note("done"))])
    async with run_on_hosts(client, world, ["host-a"]) as (handle, queue):
        result = await handle.result()
    assert result.outcome == "finished"
    assert ("create", queue) in world.queues  # made on the shared queue, by any host
    on_host = [q for name, q in world.queues if name != "create"]
    assert on_host and set(on_host) == {f"{queue}@host-a"}
    assert world.checks == []


async def test_a_lost_host_costs_one_restart_from_the_checkpoint_on_another_host(
    client: Client,
) -> None:
    # host-a never polls: its sandbox's watch waits unstarted, the server lists no poller.
    world = HostWorld({1: "host-a", 2: "host-b"})
    world.script(2, [exits(0, final=note("done"))])
    async with run_on_hosts(client, world, ["host-b"]) as (handle, queue):
        result = await handle.result()
        status: RunStatus = await status_of(handle)
    assert result.outcome == "finished"
    assert result.restarts == 1
    [restart] = status.restarts
    assert restart.reason.startswith("host lost: host-a"), restart.reason
    assert status.lost_hosts == ["host-a"]
    # Asked about three times (a third of the threshold each), never sent a step again after.
    assert 2 <= len(world.checks) <= 5 and set(world.checks) == {f"{queue}@host-a"}
    assert {q for name, q in world.queues if name == "observe"} == {f"{queue}@host-b"}
    assert "pause box-1" not in world.log and "stop box-1" not in world.log


async def test_a_host_back_before_its_lost_threshold_costs_nothing(client: Client) -> None:
    world = HostWorld({1: "host-a"})
    world.script(1, [progress(note("step 2", "step 1 done")), exits(0, final=note("done"))])
    world.check_gate = asyncio.Event()
    async with run_on_hosts(client, world, []) as (handle, queue):
        # The watch waited unstarted; while the run asks about its host, the host comes back.
        while not world.checks:
            await asyncio.sleep(0.05)
        stop = asyncio.Event()
        back = asyncio.create_task(_host_worker(client, world, f"{queue}@host-a", stop))
        await asyncio.sleep(0.5)
        world.check_gate.set()
        result = await handle.result()
        stop.set()
        await back
    assert result.outcome == "finished"
    assert result.restarts == 0
    assert len(world.checks) == 1


async def test_a_run_pinned_to_hosts_is_made_on_the_first_of_them_still_there(
    client: Client,
) -> None:
    world = HostWorld({})
    world.script(1, [exits(0, final=note("done"))])
    pinned = ["host-x", "host-y"]  # host-x never polls; host-z is up but not allowed
    async with run_on_hosts(client, world, ["host-y", "host-z"], hosts=pinned) as (handle, q):
        result = await handle.result()
        status: RunStatus = await status_of(handle)
    assert (result.outcome, result.restarts) == ("finished", 0)
    assert [queue for name, queue in world.queues if name == "create"] == [f"{q}@host-y"]
    assert status.lost_hosts == ["host-x"]
    assert set(status.sandbox_hosts.values()) == {"host-y"}
