"""Leases on the time-skipping server: a progressing agent keeps its sandbox for hours, a
stalled one's lease is left to end, and a sandbox paused at its lease end carries on."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from temporalio import activity
from temporalio.client import Client

from activities.errors import to_application_error
from activities.models import (
    ActivityName,
    AgentStarted,
    Observation,
    ObserveInput,
    StartAgentInput,
)
from activities.providers.protocol import SandboxNotRunning
from fakes.activities import FakeWorld, Quiet, Step, exits, note, progress
from overnight.core.models import Budget
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
    # A quiet look ends at the stall's half (7.5 min), where the card says it is coming.
    world.script(1, steady_work(looks=70))
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


class LeaseEndsBeforeTheFreshStart(FakeWorld):
    """The agent exits for a fresh context and its sandbox's lease ends before the fresh start
    reaches it (as with no worker alive in between): the first fresh start finds it paused."""

    @activity.defn(name=ActivityName.START_AGENT)
    async def start_agent(self, request: StartAgentInput) -> AgentStarted:
        box = self._answering(request.sandbox_id)
        if request.fresh_start and not self.lease_pauses:
            box.state = "paused"
            box.lease_ends_at = activity.info().current_attempt_scheduled_time
            self.lease_pauses.append(box.sandbox_id)
            raise to_application_error(SandboxNotRunning(box.sandbox_id, "paused"))
        return await super().start_agent(request)

    @activity.defn(name=ActivityName.OBSERVE_AGENT)
    async def observe_agent(self, request: ObserveInput) -> Observation:
        box = self._answering(request.sandbox_id)
        if box.state == "paused":
            return Observation(
                process_state="exited",
                exit_code=75,
                sandbox_state="paused",
                lease_ends_at=box.lease_ends_at,
            )
        return await super().observe_agent(request)


async def test_a_lease_ending_before_a_fresh_start_wakes_the_sandbox_and_starts_it_there(
    client: Client,
) -> None:
    world = LeaseEndsBeforeTheFreshStart()
    world.lease = HOUR
    world.script(1, [progress("cp-1"), exits(75), exits(75), exits(0, final="cp-2")])
    spec = make_spec(sandbox_timeout_seconds=3600)
    async with started_run(client, world, spec) as handle:
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "fresh_start_after_lease_end")
    # Woken, and the agent started there with a fresh context: no new sandbox, no restart.
    assert (world.lease_pauses, world.wakes, list(world.sandboxes)) == (
        ["box-1"],
        ["box-1"],
        ["box-1"],
    )
    assert [(start.sandbox_id, start.fresh_start) for start in world.starts] == [
        ("box-1", 0),
        ("box-1", 1),
    ]
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert (status.fresh_starts_used, status.lease_resumes) == (1, 1)
