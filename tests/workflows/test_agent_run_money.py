"""Money on the time-skipping server: the provider's charges replace the estimate, and the
key's daily spending limit holds a run, which goes on by itself when the window reopens."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from fakes.activities import Quiet, Step, exits, note, progress
from overnight.core.models import Budget, RunSpec
from tests.workflows.harness import (
    eventually,
    keep_history,
    make_spec,
    started_run,
    status_of,
    until_idle,
    until_state,
)
from tests.workflows.money_world import MoneyWorld
from workflows.pure.money import DAILY_WINDOW_RECHECK, MONEY_READ_EVERY

HOUR = timedelta(hours=1)
DONE = exits(0, final=note("done", "all done"))


def runtime_spec(**overrides: Any) -> RunSpec:
    return make_spec(provider="runtime", sandbox_timeout_seconds=3600, **overrides)


@pytest.fixture
def money_world() -> MoneyWorld:
    return MoneyWorld()


async def test_a_run_refused_by_the_daily_limit_waits_and_goes_on_by_itself_when_it_reopens(
    client: Client, time_skipping_env: WorkflowEnvironment, money_world: MoneyWorld
) -> None:
    world = money_world
    world.daily_left = 0
    world.script(2, [DONE])
    async with started_run(client, world, runtime_spec()) as handle:
        status = await until_state(handle, "needs_attention")
        # Refused before anything was made: no sandbox, no failed create to clean up.
        assert world.sandboxes == {} and world.refusals == ["create 1"]
        assert status.waiting_for_daily_window
        assert "daily spending limit" in (status.attention_reason or "")
        assert status.daily_limit is None or status.daily_limit.remaining_usd == 0
        # Still closed at the next look: it keeps waiting, durably.
        await until_idle(world)
        await time_skipping_env.sleep(DAILY_WINDOW_RECHECK + timedelta(seconds=5))
        await eventually(_limit_reads(world), lambda n: n >= 1)
        await until_idle(world)
        status = await status_of(handle)
        assert status.state == "needs_attention" and world.sandboxes == {}
        assert status.daily_limit is not None and status.daily_limit.remaining_usd == 0
        # The window reopens: at the next look the run makes its sandbox and finishes.
        world.daily_left = 10_000_000
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "daily_limit_wait")
    assert result.outcome == "finished"
    assert [start.attempt for start in world.creates()] == [2]
    # Held by the provider's limit, not by a failure: no restart is counted, and the wait
    # is not run time.
    assert result.restarts == 0
    assert not status.waiting_for_daily_window
    assert status.daily_limit is not None and status.daily_limit.remaining_usd == 10.0
    assert result.hours_used < 0.1


async def test_a_daily_limit_that_never_reopens_fails_the_run_after_attention_hours(
    client: Client, money_world: MoneyWorld
) -> None:
    world = money_world
    world.daily_left = 0
    async with started_run(client, world, runtime_spec(attention_hours=2)) as handle:
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "OutOfBudget"
    assert "daily spending limit" in str(cause)
    # Looked at every 15 minutes for two hours: about eight reads, never a sandbox.
    assert 6 <= world.limit_reads <= 9
    assert world.sandboxes == {}


async def test_a_wake_refused_by_the_daily_limit_keeps_the_same_agent_paused_until_it_reopens(
    client: Client, time_skipping_env: WorkflowEnvironment, money_world: MoneyWorld
) -> None:
    world = money_world
    world.lease = HOUR
    # Progress, so the run wants to extend the lease; the limit refuses the extension, the
    # lease ends, the sandbox pauses, and the wake is refused too.
    steps: list[Step] = [progress(note(f"step {n + 2}", f"step {n + 1} done")) for n in range(3)]
    steps += [Quiet()] * 10 + [DONE]
    world.script(1, steps)
    world.daily_left = 1_000  # a tenth of a cent: no lease fits
    world.daily_limit = 5_000_000
    spec = runtime_spec(stall_seconds=3 * 3600, budget=Budget(max_hours=12))
    # The first create is let through (the limit is tightened only after it).
    world.daily_left = None
    async with started_run(client, world, spec) as handle:
        await until_state(handle, "running")
        await until_idle(world)
        world.daily_left = 1_000
        status = await until_state_after(time_skipping_env, handle, "needs_attention", HOUR)
        assert status.waiting_for_daily_window
        # Nothing was set aside: the same sandbox waits paused, its agent frozen in it.
        assert world.state_of(1) == "paused" and world.paused == []
        assert status.sandbox_id == "box-1"
        assert any(r.startswith("extend") for r in world.refusals)
        assert any(r.startswith("wake") for r in world.refusals)
        world.daily_left = 5_000_000
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "daily_limit_wake")
    assert result.outcome == "finished"
    # The same agent went on: one sandbox, no restart, woken once more after the wait.
    assert (len(world.creates()), result.restarts) == (1, 0)
    assert world.wakes[-1] == "box-1"
    assert status.lease_resumes >= 1


async def test_the_providers_charges_replace_the_estimate_for_the_sandboxes_they_cover(
    client: Client, time_skipping_env: WorkflowEnvironment, money_world: MoneyWorld
) -> None:
    world = money_world
    world.daily_left = None
    world.daily_limit = None
    world.script(1, [Quiet()] * 3 + [exits(3)])
    world.script(2, [Quiet()] * 3 + [DONE])
    # Runtime says sandbox 1 cost $0.50 (with $0.25 held), far above the estimate.
    world.charged["box-1"] = (500_000, 250_000)
    world.charged["box-2"] = (10_000, 0)
    spec = runtime_spec(budget=Budget(max_spend_usd=20, max_hours=12), stall_seconds=6 * 3600)
    async with started_run(client, world, spec) as handle:
        result = await handle.result()
        status = await status_of(handle)
    assert result.outcome == "finished" and result.restarts == 1
    # Read at each sandbox's end (after its pause or stop): the final figures.
    assert world.charge_reads == ["box-1", "box-2"]
    assert status.spend_charged_usd == pytest.approx(0.76)
    assert status.spend_usd == pytest.approx(0.76, abs=0.001)
    assert status.spend_estimated_usd < 0.1
    # The observe brought charges and the limit along at most every five minutes.
    assert world.money_reads >= 1


async def test_charges_past_the_spend_budget_stop_the_run_for_a_person(
    client: Client, time_skipping_env: WorkflowEnvironment, money_world: MoneyWorld
) -> None:
    world = money_world
    world.daily_left = None
    world.script(1, [Quiet()] * 40)
    # The estimate would allow hours; Runtime's figure says the budget is spent.
    world.charged["box-1"] = (2_100_000, 0)
    spec = runtime_spec(budget=Budget(max_spend_usd=2, max_hours=12), stall_seconds=6 * 3600)
    async with started_run(client, world, spec) as handle:
        status = await until_state_after(
            time_skipping_env, handle, "needs_attention", MONEY_READ_EVERY * 2
        )
    assert "spend budget used up" in (status.attention_reason or "")
    assert not status.waiting_for_daily_window
    assert status.spend_charged_usd == pytest.approx(2.1)


def _limit_reads(world: MoneyWorld) -> Any:
    async def probe() -> int:
        return world.limit_reads

    return probe


async def until_state_after(
    env: WorkflowEnvironment, handle: Any, state: str, within: timedelta
) -> Any:
    """Skip time a minute at a time until the run reaches `state` (at most `within`)."""
    skipped = timedelta()
    while True:
        status = await status_of(handle)
        if status.state == state:
            return status
        if skipped > within:
            raise AssertionError(f"still {status.state} after {within}")
        await env.sleep(timedelta(minutes=1))
        skipped += timedelta(minutes=1)
