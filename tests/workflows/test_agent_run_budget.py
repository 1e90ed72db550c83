"""An exhausted budget: the run waits for a person, resumes when extended, fails if nobody comes.

Also the `extend_budget` signal and update: what they accept, what they refuse, and that a bad
one never disturbs the run.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from fakes.activities import FakeWorld, exits, progress
from overnight.core.models import Budget, BudgetExtension
from tests.workflows.harness import (
    eventually,
    keep_history,
    make_spec,
    started_run,
    status_of,
    until_state,
)
from workflows.agent_run import AgentRun
from workflows.pure.state import SupervisorState


async def test_out_of_restarts_waits_for_a_person_and_resumes_when_extended(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(1)])
    world.script(2, [progress("cp-2"), exits(1)])
    world.script(3, [exits(0, final="cp-3")])
    spec = make_spec(budget=Budget(max_restarts=1))
    async with started_run(client, world, spec) as handle:
        waiting = await until_state(handle, "needs_attention")
        # The state changes first, then the sandbox is paused.
        await eventually(lambda: _last(world.log), lambda entry: entry == "pause box-2")
        log_while_waiting = list(world.log)
        await handle.signal("extend_budget", BudgetExtension(restarts=1))
        result = await handle.result()
        await keep_history(handle, "needs_attention_extended")

    assert waiting.attention_reason == "restart budget used up (1 of 1)"
    assert waiting.sandbox_id == "box-2"
    # The last sandbox was paused, none is left running while the run waits.
    assert log_while_waiting[-1] == "pause box-2"
    assert not any(entry.startswith("stop") for entry in log_while_waiting)
    third = world.creates()[2]
    # The restart that was due when the budget ran out is carried out on resume, from cp-2.
    assert (third.attempt, third.restart_reason, third.checkpoint) == (
        3,
        "agent crashed (exit 1)",
        "cp-2",
    )
    assert (result.outcome, result.restarts, result.attempts) == ("finished", 2, 3)
    assert result.checkpoint == "cp-3"


async def test_out_of_budget_run_nobody_extends_fails_with_out_of_budget(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(1)])
    spec = make_spec(budget=Budget(max_restarts=0), attention_hours=2)
    async with started_run(client, world, spec) as handle:
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
        await keep_history(handle, "out_of_budget")

    error = failure.value.cause
    assert isinstance(error, ApplicationError)
    assert error.type == "OutOfBudget"
    assert "restart budget used up (0 of 0)" in error.message
    assert "nobody extended it within 2 h" in error.message
    assert world.state_of(1) == "paused"  # kept for a look, not running
    assert world.running() == []


async def test_run_nobody_extends_reports_failed_in_its_status(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [exits(1)])
    spec = make_spec(budget=Budget(max_restarts=0), attention_hours=1)
    async with started_run(client, world, spec) as handle:
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        status = await status_of(handle)

    assert status.state == "failed"


async def test_hours_running_out_pauses_a_healthy_agent_until_more_hours_come(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    world.script(1, [progress("cp-1")])  # then quiet; with an hour's stall only hours stop it
    world.script(2, [exits(0)])
    spec = make_spec(budget=Budget(max_hours=0.5), stall_seconds=3600)
    async with started_run(client, world, spec) as handle:
        await time_skipping_env.sleep(timedelta(minutes=20))
        before = await status_of(handle)
        await time_skipping_env.sleep(timedelta(minutes=11))
        waiting = await until_state(handle, "needs_attention")
        await handle.signal("extend_budget", BudgetExtension(hours=1))
        result = await handle.result()

    assert before.state == "running"
    assert waiting.attention_reason is not None
    assert waiting.attention_reason.startswith("hours budget used up (0.50 of 0.5 h)")
    assert world.log[:2] == ["create box-1", "pause box-1"]
    second = world.creates()[1]
    # Not a failure: the run goes on from its checkpoint in a new sandbox, uncounted.
    assert second.restart_reason == "resumed after the budget was extended"
    assert second.checkpoint == "cp-1"
    assert (result.restarts, result.attempts) == (0, 2)


async def test_extend_budget_update_answers_the_new_budget_and_refuses_bad_ones(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(1)])
    world.script(2, [exits(0)])
    spec = make_spec(budget=Budget(max_restarts=0, max_spend_usd=5))
    async with started_run(client, world, spec) as handle:
        await until_state(handle, "needs_attention")
        with pytest.raises(WorkflowUpdateFailedError) as empty:
            await handle.execute_update("extend_budget", BudgetExtension(), result_type=Budget)
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update("extend_budget", {"restarts": -1}, result_type=Budget)
        still = await status_of(handle)
        grown = await handle.execute_update(
            "extend_budget", BudgetExtension(restarts=2, spend_usd=1.5), result_type=Budget
        )
        result = await handle.result()
        await keep_history(handle, "extend_update")

    assert "adds nothing" in str(empty.value.cause)
    assert still.state == "needs_attention" and still.budget == spec.budget
    assert grown == Budget(max_restarts=2, max_hours=24, max_spend_usd=6.5)
    assert (result.outcome, result.restarts) == ("finished", 1)


def test_extend_budget_validator_refuses_a_run_that_has_ended() -> None:
    run = AgentRun()
    spec = make_spec()
    run._s = SupervisorState(
        spec=spec, budget=spec.budget, started_at=datetime.now(UTC), state="finished"
    )
    with pytest.raises(ValueError, match="already finished"):
        run._validate_extend_budget(BudgetExtension(restarts=1))


@pytest.mark.parametrize(
    "payload",
    [
        {"restarts": -1},
        {"hours": "lots"},
        "more please",
        [1, 2],
        {"restarts": 3, "bogus": True},
        {"spend_usd": -4},
    ],
)
async def test_bad_extend_budget_signal_is_ignored_and_the_run_carries_on(
    client: Client, world: FakeWorld, payload: Any
) -> None:
    world.script(1, [exits(1)])
    world.script(2, [exits(0)])
    spec = make_spec(budget=Budget(max_restarts=0))
    async with started_run(client, world, spec) as handle:
        await until_state(handle, "needs_attention")
        await handle.signal("extend_budget", payload)
        await handle.signal("extend_budget", BudgetExtension(restarts=1))
        result = await handle.result()
        status = await status_of(handle)

    # Only the good extension counted; the bad one neither failed the run nor added anything.
    assert status.budget.max_restarts == 1
    assert (result.outcome, result.restarts) == ("finished", 1)


async def _last(log: list[str]) -> str:
    return log[-1]


async def test_extend_budget_signal_with_extra_arguments_is_ignored(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [exits(1)])
    world.script(2, [exits(0)])
    async with started_run(client, world, make_spec(budget=Budget(max_restarts=0))) as handle:
        await until_state(handle, "needs_attention")
        await handle.signal("extend_budget", args=[{"restarts": 5}, {"restarts": 5}])
        await handle.signal("extend_budget", BudgetExtension(restarts=1))
        result = await handle.result()
        status = await status_of(handle)

    assert status.budget.max_restarts == 1
    assert result.outcome == "finished"


async def test_failed_create_stops_only_the_half_made_sandbox(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(1)])
    world.create_errors[2] = ApplicationError("no such image", type="InvalidSpec")
    async with started_run(client, world, make_spec()) as handle:
        waiting = await until_state(handle, "needs_attention")
        boxes_while_waiting = (world.state_of(1), world.state_of(2))
        await handle.signal("cancel")
        await handle.result()

    assert waiting.attention_reason is not None
    assert waiting.attention_reason.startswith("could not create sandbox 2: ")
    assert "no such image" in waiting.attention_reason
    # The half-made sandbox is stopped; the crashed one stays paused for a look while the run
    # waits for a person.
    assert boxes_while_waiting == ("paused", "stopped")
