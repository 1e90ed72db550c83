"""Leases on the time-skipping server: a progressing agent keeps its sandbox for hours, a
stalled one's lease is left to end, and a sandbox paused at its lease end carries on."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from temporalio.client import Client

from fakes.activities import FakeWorld, Quiet, Step, exits, note, progress
from overnight.models import Budget
from tests.workflows.harness import keep_history, make_spec, started_run, status_of

HOUR = timedelta(hours=1)


def steady_work(looks: int) -> Iterator[Step]:
    """A new checkpoint every other look (a quiet look lasts up to ten minutes)."""
    for n in range(looks):
        yield Quiet()
        yield progress(note(f"step {n + 2}", f"step {n + 1} done"))
    yield exits(0, final=note("done", "all steps done"))


async def test_a_progressing_agent_runs_eight_hours_in_one_sandbox_with_no_restart(
    client: Client, world: FakeWorld
) -> None:
    world.lease = HOUR
    world.script(1, steady_work(looks=60))
    spec = make_spec(sandbox_timeout_seconds=3600, budget=Budget(max_hours=12))
    async with started_run(client, world, spec) as handle:
        result = await handle.result()
        await keep_history(handle, "lease_extended")
    assert result.outcome == "finished"
    assert result.hours_used >= 8
    assert (len(world.creates()), result.restarts, result.attempts) == (1, 0, 1)
    # Kept by extensions ahead of the end, never by meeting it.
    assert len(world.extends) >= 8
    assert world.lease_pauses == [] and world.wakes == []


async def test_a_stalled_agents_sandbox_is_not_extended(client: Client, world: FakeWorld) -> None:
    world.lease = HOUR
    world.script(1, [Quiet()] * 40)
    world.script(2, [exits(0, final=note("done", "all done"))])
    spec = make_spec(sandbox_timeout_seconds=3600, stall_seconds=90 * 60)
    async with started_run(client, world, spec) as handle:
        result = await handle.result()
        status = await status_of(handle)
    assert result.restarts == 1
    assert world.extends == []
    # Its lease ended (paused, checkpoint kept); woken within the stall allowance, then the
    # stall restarted it from its checkpoint in a new sandbox.
    assert world.lease_pauses[0] == "box-1"
    assert status.restarts[0].reason == "agent stalled 90 min"


async def test_a_sandbox_paused_at_its_lease_end_is_woken_and_the_same_agent_goes_on(
    client: Client, world: FakeWorld
) -> None:
    world.lease = HOUR
    # A long quiet step (within the stall allowance): no progress, no extension, so the lease
    # ends and the sandbox pauses; the run wakes it and the same agent finishes its step.
    steps: list[Step] = [Quiet()] * 8
    steps += [progress(note("step 2", "step 1 done")), exits(0, final=note("done", "all done"))]
    world.script(1, steps)
    spec = make_spec(sandbox_timeout_seconds=3600, stall_seconds=2 * 3600)
    async with started_run(client, world, spec) as handle:
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "lease_end_woken")
    assert result.outcome == "finished"
    assert (len(world.creates()), result.restarts) == (1, 0)
    assert world.lease_pauses == ["box-1"] and world.wakes == ["box-1"]
    assert status.lease_resumes == 1
    assert "all done" in (result.checkpoint or "")


async def test_each_sandbox_is_capped_at_what_the_spend_budget_has_left(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress(note("step 2", "step 1 done")), exits(3)])
    world.script(2, [exits(0, final=note("done", "all done"))])
    spec = make_spec(budget=Budget(max_spend_usd=2.0))
    async with started_run(client, world, spec) as handle:
        await handle.result()
    first, second = (i.max_total_cost_micros for i in world.create_inputs[:2])
    assert first == 2_000_000
    assert second is not None and 0 < second < first


async def test_without_a_spend_budget_no_cost_cap_is_asked_for(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [exits(0, final=note("done", "all done"))])
    async with started_run(client, world, make_spec()) as handle:
        await handle.result()
    assert [i.max_total_cost_micros for i in world.create_inputs] == [None]
