"""Sandboxes whose pause ends their agents (local ones on a machine with no cgroup to freeze):
after the wake the run starts the agent again in the same sandbox, from its checkpoint, and
counts no restart: for an answered question, and at a lease end."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity
from temporalio.client import Client

from activities.models import ActivityName, SandboxInfo, SandboxRef
from fakes.activities import FakeWorld, Quiet, Step, exits, note, progress
from tests.workflows.harness import keep_history, make_spec, started_run, status_of, until_state
from tests.workflows.test_agent_run_talk import ASK, kit_checkpoint

AGAIN = "its sandbox's pause ended it (no cgroup to freeze): from the checkpoint"


class NoFreezerWorld(FakeWorld):
    """Its sandboxes say their pause ends their agents, files kept."""

    @activity.defn(name=ActivityName.PAUSE_SANDBOX)
    async def pause_sandbox(self, request: SandboxRef) -> SandboxInfo:
        info = await super().pause_sandbox(request)
        return info.model_copy(update={"pause_ends_agents": True})

    @activity.defn(name=ActivityName.WAKE_SANDBOX)
    async def wake_sandbox(self, request: SandboxRef) -> SandboxInfo:
        info = await super().wake_sandbox(request)
        return info.model_copy(update={"pause_ends_agents": True})


async def test_an_answered_question_starts_the_agent_again_in_the_same_sandbox(
    client: Client,
) -> None:
    world = NoFreezerWorld()
    world.script(1, [progress(kit_checkpoint(1, ask=ASK)), exits(0, final=note("done"))])
    async with started_run(client, world, make_spec()) as handle:
        await until_state(handle, "waiting_for_answer")
        await handle.execute_update("answer", "yes", result_type=str)
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "pause_ends_agents_answered")

    assert world.wakes == ["box-1"] and list(world.sandboxes) == ["box-1"]
    again = world.starts[1:]
    assert [(s.sandbox_id, s.restart_reason) for s in again] == [("box-1", AGAIN)]
    assert [(a.request_id, a.answer) for a in world.answers] == [("q1-0123456789ab", "yes")]
    # Answered after the start: the agent, from its checkpoint, asks again and finds it.
    started_again = len(world.log) - 1 - world.log[::-1].index("start agent in box-1")
    assert world.log.index("answer q1-0123456789ab in box-1") > started_again
    assert (result.outcome, result.restarts) == ("finished", 0)
    assert (status.restarts_used, status.fresh_starts_used) == (0, 0)


async def test_a_lease_end_starts_the_agent_again_in_the_same_sandbox(client: Client) -> None:
    world = NoFreezerWorld()
    world.lease = timedelta(hours=1)
    steps: list[Step] = [Quiet()] * 8
    steps += [progress(note("step 2", "step 1 done")), exits(0, final=note("done", "all done"))]
    world.script(1, steps)
    spec = make_spec(sandbox_timeout_seconds=3600, stall_seconds=2 * 3600)
    async with started_run(client, world, spec) as handle:
        result = await handle.result()
        await keep_history(handle, "pause_ends_agents_lease_end")

    assert world.lease_pauses == ["box-1"] and world.wakes == ["box-1"]
    assert list(world.sandboxes) == ["box-1"]
    assert [(s.sandbox_id, s.restart_reason) for s in world.starts[1:]] == [("box-1", AGAIN)]
    assert (result.outcome, result.restarts, result.attempts) == ("finished", 0, 1)
