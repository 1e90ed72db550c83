"""Anyone who can signal the pool's `OvernightAdmission` workflow may send `request` and
`release` with any payload. None of it moves the pool past its workers' settings: a request's
limits are not the pool's, a release naming another run frees no place, and a request's owner
and priority are held to the bounds the workers set (a spec past them is refused at its start).
On the time-skipping server, runs of `FakeWorld`s sharing one pool (tests/workflows/pool_world).
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio import activity
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from activities.admission.activities import AdmissionActivities
from activities.models import ActivityName
from activities.models.admission import HolderCheck, WorkflowIds
from fakes.activities import Quiet
from overnight.core.admission import (
    RELEASE_SIGNAL,
    REQUEST_SIGNAL,
    AdmissionSettings,
    admission_refusals,
    parse_admission,
)
from overnight.core.grants import BadSetting
from overnight.core.models import RunSpec
from overnight.worker import binaries
from tests.workflows.harness import Handle, eventually, make_spec
from tests.workflows.pool_world import (
    PoolWorld,
    keep_pool_history,
    places,
    pool_of_one,
    start,
    terminate,
)
from workflows.pure.admission_queue import Places

# The holder works on, quietly, for as long as the test looks.
WORKING = [Quiet()] * 50


@pytest_asyncio.fixture(scope="module")
async def attack_env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping server of this module's own: its tests end runs mid-activity, which
    would hold the shared server's clock for the tests after them."""
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=str(binaries.test_server_path()),
    )
    try:
        yield env
    finally:
        await env.shutdown()


@asynccontextmanager
async def held_pool(
    client: Client,
    settings: AdmissionSettings | None = None,
    admission: AdmissionActivities | None = None,
) -> AsyncIterator[tuple[PoolWorld, Handle, Handle]]:
    """A pool of one place: a run holding it, and a second run waiting for it."""
    async with pool_of_one(
        client, "holder", "next", settings=settings, admission=admission
    ) as worlds:
        worlds["holder"].script(1, WORKING)
        holder = await start(client, worlds["holder"], make_spec(stall_seconds=86400))
        queued: Handle | None = None
        try:
            await eventually(lambda: places(client, worlds["holder"]), lambda p: bool(p.holding))
            queued = await start(client, worlds["next"], make_spec())
            await eventually(lambda: places(client, worlds["holder"]), lambda p: bool(p.waiting))
            yield worlds["holder"], holder, queued
        finally:
            for handle in (holder, queued):
                await terminate(handle)


@asynccontextmanager
async def uncounted_run(client: Client) -> AsyncIterator[Handle]:
    """A run going on that no pool counts (it never asks for a place)."""
    async with pool_of_one(client, "free") as worlds:
        worlds["free"].counted = False
        worlds["free"].script(1, WORKING)
        run = await start(client, worlds["free"], make_spec(stall_seconds=86400))
        try:
            await eventually(lambda: _state_of(run), lambda state: state == "running")
            yield run
        finally:
            await terminate(run)


async def _state_of(handle: Handle) -> str:
    from tests.workflows.harness import status_of

    return (await status_of(handle)).state


async def signal_pool(client: Client, world: PoolWorld, name: str, arg: Any) -> None:
    await client.get_workflow_handle(world.terms.workflow_id).signal(name, arg)


async def settled(client: Client, world: PoolWorld) -> Places:
    """The pool once what was sent has been acted on (a second of real time: its checks are
    activities on the test's own workers)."""
    await asyncio.sleep(1.0)
    return await places(client, world)


async def test_a_request_signal_does_not_set_the_pools_limits(
    attack_env: WorkflowEnvironment,
) -> None:
    client = attack_env.client
    async with held_pool(client) as (world, holder, queued):
        forged = {"holder": queued.id, "max_runs": None, "max_runs_per_key": None}
        await signal_pool(client, world, REQUEST_SIGNAL, forged)
        pool = await settled(client, world)

    # The limit stays its workers' one place: the queued run still waits.
    assert pool.max_runs == 1
    assert list(pool.holding) == [holder.id]
    assert [w.holder for w in pool.waiting] == [queued.id]


async def test_a_request_in_the_name_of_a_run_not_asking_takes_no_place(
    attack_env: WorkflowEnvironment,
) -> None:
    client = attack_env.client
    async with held_pool(client) as (world, holder, queued), uncounted_run(client) as free:
        # Places asked for in the names of a run that never asks and of no workflow at all:
        # let in, they would hold places no run gives back.
        for name in (free.id, "no-such-run"):
            await signal_pool(client, world, REQUEST_SIGNAL, {"holder": name})
        pool = await settled(client, world)
        await holder.cancel()
        handed = await eventually(lambda: places(client, world), lambda p: queued.id in p.holding)

    assert [w.holder for w in pool.waiting] == [queued.id]
    assert list(handed.holding) == [queued.id] and handed.waiting == []


async def test_a_release_naming_another_run_frees_no_place(
    attack_env: WorkflowEnvironment,
) -> None:
    client = attack_env.client
    async with held_pool(client) as (world, holder, queued):
        # Someone else gives back the holder's place, and the queued run's turn.
        await signal_pool(client, world, RELEASE_SIGNAL, holder.id)
        await signal_pool(client, world, RELEASE_SIGNAL, queued.id)
        forged = await settled(client, world)
        # The holder's own release (it ends) frees its place: the queued run goes in.
        await holder.cancel()
        handed = await eventually(lambda: places(client, world), lambda p: queued.id in p.holding)
        await keep_pool_history(client, world, "release_checked")

    assert list(forged.holding) == [holder.id]
    assert [w.holder for w in forged.waiting] == [queued.id]
    assert list(handed.holding) == [queued.id] and handed.waiting == []


class SilentOnce(AdmissionActivities):
    """Real admission activities, except that the first release check of each holder named
    finds it not answering (its worker gone or slow, as after a SIGKILL)."""

    def __init__(self, client: Client, silent: set[str]) -> None:
        # Asked again a second later (real time: nothing waits on a timer to skip it).
        super().__init__(client, AdmissionSettings(max_runs=1, check_seconds=1))
        self.silent = silent
        self.silenced: list[str] = []

    @activity.defn(name=ActivityName.RELEASED_HOLDERS)
    async def released_holders(self, input: HolderCheck) -> WorkflowIds:
        found = await super().released_holders(input)
        quiet = [i for i in input.ids if input.ask and i in self.silent]
        self.silent -= set(quiet)
        self.silenced += quiet
        return WorkflowIds(
            ids=[i for i in found.ids if i not in quiet], unanswered=[*found.unanswered, *quiet]
        )


async def test_a_release_whose_holder_did_not_answer_is_asked_again_and_frees_its_place(
    attack_env: WorkflowEnvironment,
) -> None:
    client = attack_env.client
    silent: set[str] = set()
    checks = SilentOnce(client, silent)
    async with held_pool(client, admission=checks) as (world, holder, queued):
        silent.add(holder.id)
        # The holder ends and gives its place back; asked whether it did, it does not answer.
        await holder.cancel()
        handed = await eventually(lambda: places(client, world), lambda p: queued.id in p.holding)
        await keep_pool_history(client, world, "release_asked_again")

    assert checks.silenced == [holder.id]
    # Its release stood and was asked again: the place went back by it, not taken back by
    # the look for closed holders (which would have left it held until then).
    assert (handed.admitted_total, handed.taken_back_total) == (2, 0)
    assert list(handed.holding) == [queued.id] and handed.waiting == []


async def test_a_request_is_held_to_the_pools_owner_and_priority_bounds(
    attack_env: WorkflowEnvironment,
) -> None:
    """Runs whose requests (as their specs wrote them, or as anyone forged them) claim
    priority 1 and owners of their own: the pool counts them within its workers' bounds."""
    client = attack_env.client
    settings = AdmissionSettings(
        max_runs=1, max_priority=3, urgent_owners=["oncall"], owners=["team-a", "oncall"]
    )
    claims = {"fresh": "fresh-owner-1", "team": "team-a", "pager": "oncall"}
    async with pool_of_one(client, "holder", *claims, settings=settings) as worlds:
        worlds["holder"].script(1, WORKING)
        pool_world = worlds["holder"]
        handles = [await start(client, pool_world, make_spec(stall_seconds=86400))]
        try:
            await eventually(lambda: places(client, pool_world), lambda p: bool(p.holding))
            specs = {name: make_spec(owner=owner, priority=1) for name, owner in claims.items()}
            for name, spec in specs.items():
                handles.append(await start(client, worlds[name], spec))
            pool = await eventually(
                lambda: places(client, pool_world), lambda p: len(p.waiting) == len(claims)
            )
        finally:
            for handle in handles:
                await terminate(handle)

    counted = {w.holder: (w.owner, w.priority) for w in pool.waiting}
    # A fresh owner is counted as none (no turn of its own), and only an urgent owner keeps 1.
    assert counted[specs["fresh"].run_id] == ("", 3)
    assert counted[specs["team"].run_id] == ("team-a", 3)
    assert counted[specs["pager"].run_id] == ("oncall", 1)


def test_a_spec_past_the_pools_bounds_is_refused_at_its_start() -> None:
    settings = parse_admission(
        {
            "OVERNIGHT_MAX_RUNS": "4",
            "OVERNIGHT_MAX_PRIORITY": "3",
            "OVERNIGHT_URGENT_OWNERS": "oncall",
            "OVERNIGHT_OWNERS": "team-a, oncall",
        }
    )
    assert (settings.max_priority, settings.urgent_owners) == (3, ["oncall"])
    assert settings.owners == ["team-a", "oncall"]

    def spec(**fields: Any) -> RunSpec:
        return RunSpec(run_id="r1", repo="/r", agent_dir="/a", command="c", **fields)

    assert admission_refusals(spec(owner="team-a", priority=3), settings) == []
    assert admission_refusals(spec(owner="oncall", priority=1), settings) == []
    assert admission_refusals(spec(), settings) == []  # no owner: always allowed
    [urgent] = admission_refusals(spec(owner="team-a", priority=1), settings)
    assert "priority 1" in urgent and "OVERNIGHT_MAX_PRIORITY" in urgent
    fresh = admission_refusals(spec(owner="fresh-owner-1", priority=3), settings)
    assert fresh == ["owner 'fresh-owner-1': not one of this pool's owners (OVERNIGHT_OWNERS)"]
    # Without a limit nothing queues, and nothing is refused.
    assert admission_refusals(spec(owner="x", priority=1), AdmissionSettings(max_priority=3)) == []


@pytest.mark.parametrize(
    "bad",
    [{"OVERNIGHT_MAX_PRIORITY": "0"}, {"OVERNIGHT_MAX_PRIORITY": "urgent"}],
)
def test_a_bound_the_worker_cannot_read_stops_it(bad: dict[str, str]) -> None:
    with pytest.raises(BadSetting, match="OVERNIGHT_MAX_PRIORITY"):
        parse_admission(bad)


async def test_the_worker_refuses_a_spec_claiming_priority_1_at_its_start(tmp_path: Path) -> None:
    from temporalio.testing import ActivityEnvironment

    from activities.models import SpecCheckInput
    from activities.sandbox.activities import SandboxActivities
    from overnight.core.grants import Grants

    settings = AdmissionSettings(max_runs=4, max_priority=2)
    (tmp_path / "agent").mkdir()
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # the spec check reads it
    asked = RunSpec(
        run_id="r1", repo=str(tmp_path), agent_dir=str(tmp_path / "agent"), command="c", priority=1
    )
    async with SandboxActivities(providers={}, grants=Grants(), admission=settings) as worker:
        checked = await ActivityEnvironment().run(worker.check_spec, SpecCheckInput(spec=asked))
        fine = await ActivityEnvironment().run(
            worker.check_spec, SpecCheckInput(spec=asked.model_copy(update={"priority": 2}))
        )
    assert [r for r in checked.refusals if r.startswith("priority 1")]
    assert fine.refusals == []
