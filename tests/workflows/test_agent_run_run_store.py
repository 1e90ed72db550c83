"""What a run keeps on its hosts beside its sandboxes, and its hosts' free space (issue 47):

- a coding agent's run frees its session store (`free_run_store`) once its sandboxes ended,
  however it ends; a run of an agent of one's own has none to free;
- a local sandbox paused below its host's floor of free space leaves the run needing
  attention in place, the reason in its status; an extension wakes the same agent, with no
  restart and no new sandbox.
"""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.client import Client

from fakes.activities import FakeWorld, SandboxPaused, exits, progress
from overnight.core.constants import HOST_FLOOR_REASON
from overnight.core.models import BudgetExtension, RunSpec
from tests.workflows.harness import eventually, make_spec, started_run, status_of, until_idle

FLOOR = HOST_FLOOR_REASON.format(
    free=1450, home="/root/.overnight", floor=2048, setting="OVERNIGHT_MIN_FREE_MIB"
)


def agent_spec(**overrides: Any) -> RunSpec:
    return RunSpec(
        run_id=f"run-{uuid.uuid4().hex[:12]}",
        repo="file:///tmp/repo",
        agent={"kind": "claude-code", "prompt": "Make the tests pass"},
        **overrides,
    )


async def test_a_coding_agents_run_frees_its_session_store_after_its_sandbox(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(0)])
    spec = agent_spec()
    async with started_run(client, world, spec) as handle:
        result = await handle.result()

    assert result.outcome == "finished"
    assert world.freed_stores == [spec.run_id]
    assert world.log.index(f"free store {spec.run_id}") > world.log.index("stop box-1")


async def test_a_cancelled_coding_agents_run_frees_it_too(client: Client, world: FakeWorld) -> None:
    world.script(1, [progress("cp-1")])
    spec = agent_spec()
    async with started_run(client, world, spec) as handle:
        await eventually(lambda: status_of(handle), lambda s: s.checkpoint_bytes > 0)
        await until_idle(world)  # see until_idle: a cancel racing an activity's end
        await handle.signal("cancel", "enough")
        result = await handle.result()

    assert result.outcome == "cancelled"
    assert world.freed_stores == [spec.run_id]


async def test_a_run_of_an_agent_of_ones_own_has_no_store_to_free(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        await handle.result()

    assert world.freed_stores == []


async def test_a_sandbox_paused_below_its_hosts_floor_waits_in_place_for_a_person(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), SandboxPaused(FLOOR), exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        held = await eventually(lambda: status_of(handle), lambda s: s.state == "needs_attention")
        await until_idle(world)
        await handle.signal("extend_budget", BudgetExtension(hours=1))
        result = await handle.result()

    assert held.attention_reason == FLOOR
    assert (held.attempt, held.restarts_used) == (1, 0)
    # The same agent went on: woken, no restart, no second sandbox.
    assert world.wakes == ["box-1"]
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert len(world.creates()) == 1
