"""CI rounds on the time-skipping server (issue 50): a run whose pull request asks
`until_checks_pass` finishes only once the checks GitHub reports on its pushed commit pass. A
failing check starts the agent again in its own sandbox (a start of the same sandbox, told the
check's name and its log's tail), its work is pushed and watched again; past
`Budget.max_ci_rounds` the run needs a person, and `extend --ci-rounds` gives the agent
another round. While CI runs, the sandbox is paused and no admission place is held.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from fakes.activities import FakeWorld, exits, progress
from fakes.delivery import checks_failing, checks_pending
from overnight.core.ci_rounds import CI_CHECK_REASON
from overnight.core.models import BudgetExtension, RunSpec
from tests.workflows.harness import (
    eventually,
    keep_history,
    make_spec,
    started_run,
    status_of,
    until_state,
)
from tests.workflows.pool_world import places, pool_of_one, start, terminate

GITHUB_REPO = "https://github.com/octo/app.git"
LOG = "E   AssertionError: due date is None\nFAILED tests/test_due.py::test_due_date"


def ci_spec(max_ci_rounds: int = 3, **overrides: object) -> RunSpec:
    """A run of a GitHub repository whose pull request must pass its checks."""
    spec = make_spec(keep_failed_days=3, **overrides)
    budget = {**spec.budget.model_dump(), "max_ci_rounds": max_ci_rounds}
    return RunSpec.model_validate(
        {
            **spec.model_dump(),
            "repo": GITHUB_REPO,
            "budget": budget,
            "pull_request": {"until_checks_pass": True},
        }
    )


async def test_a_check_that_fails_once_costs_one_round_in_the_same_sandbox(
    client: Client, world: FakeWorld
) -> None:
    world.delivery.check_looks = [checks_pending("tests"), checks_failing("tests", LOG)]
    # The agent finishes, is told the failure, fixes it and finishes again.
    world.script(1, [progress("cp-1"), exits(0), progress("cp-2"), exits(0)])
    spec = ci_spec()
    async with started_run(client, world, spec) as handle:
        result = await handle.result()
        await keep_history(handle, "ci_round_then_passed")

    first, again = world.starts
    assert first.sandbox_id == "box-1"
    assert again.sandbox_id == "box-1" and again.process_id == "agent-1-0-c1"
    assert again.restart_reason.startswith(f"{CI_CHECK_REASON} (round 1): tests (failure)")
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    # Two pushes (one per round), one pull request brought up to date with the second.
    assert len(world.delivery.pushes) == 2
    pull_commits = [call.commit for call in world.delivery.pull_calls]
    assert len(pull_commits) == 2 and pull_commits[1] == world.delivery.origin[spec.branch]
    assert len(world.delivery.pulls) == 1
    assert world.delivery.pull_calls[-1].facts.ci_rounds == 1
    assert world.delivery.pull_calls[-1].facts.ci_failed == ["tests (failure): 1 failed"]
    # Three watches: pending, failing, then the second commit's pass.
    watched = [w.commit for w in world.delivery.watches]
    assert len(watched) == 3 and watched[0] == watched[1] != watched[2]
    assert watched[2] == result.pushed_commit
    # Paused while CI ran (twice), woken for the round, stopped at the end.
    assert world.paused == ["box-1", "box-1"] and world.wakes == ["box-1"]
    assert world.stopped == ["box-1"]
    assert result.ci is not None
    assert (result.ci.state, result.ci.rounds_used, result.ci.max_rounds) == ("passed", 1, 3)
    assert result.ci.failing is not None and result.ci.failing.name == "tests"


async def test_the_agent_is_told_the_check_and_its_log(client: Client, world: FakeWorld) -> None:
    world.delivery.check_looks = [checks_failing("unit tests", LOG)]
    world.script(1, [exits(0), exits(0)])
    async with started_run(client, world, ci_spec()) as handle:
        result = await handle.result()

    assert result.outcome == "finished"
    [text] = [start.told for start in world.starts if start.told]
    assert "check: unit tests" in text and LOG in text
    assert "end your turn" in text and "watches CI again" in text


async def test_a_check_that_never_passes_needs_a_person_after_max_ci_rounds(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    world.delivery.check_looks = [checks_failing(), checks_failing(), checks_failing()]
    world.script(1, [exits(0)] * 4)
    spec = ci_spec(max_ci_rounds=1)
    async with started_run(client, world, spec) as handle:
        waiting = await until_state(handle, "needs_attention")
        paused_then = world.state_of(1)
        starts_then = len(world.starts)
        # A person gives it one more round: the agent is started again, and then it passes
        # (the third look fails, then every check passes).
        await handle.signal("extend_budget", BudgetExtension(ci_rounds=2))
        result = await handle.result()
        await keep_history(handle, "ci_rounds_used_up_extended")

    assert waiting.attention_reason is not None
    assert waiting.attention_reason.startswith(
        "CI checks still failing after 1 round of 1 allowed: last, tests (failure)"
    )
    assert waiting.ci is not None and waiting.ci.state == "failing"
    assert waiting.ci.failing is not None and "FAILED test_due_date" in waiting.ci.failing.log_tail
    assert (waiting.ci.rounds_used, waiting.ci.max_rounds) == (1, 1)
    assert paused_then == "paused" and starts_then == 2
    assert (result.outcome, result.restarts) == ("finished", 0)
    assert result.ci is not None and result.ci.rounds_used == 3
    assert world.notified()[:1] == ["needs_attention"]


async def test_checks_pending_past_attention_hours_need_a_person(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    world.delivery.check_looks = [checks_pending("slow")] * 200
    world.script(1, [exits(0)])
    async with started_run(client, world, ci_spec(attention_hours=1)) as handle:
        await eventually(lambda: _count(world.delivery.watches), lambda n: n >= 1)
        await time_skipping_env.sleep(timedelta(hours=1, minutes=10))
        waiting = await until_state(handle, "needs_attention")
        await handle.signal("cancel", "CI is broken")
        result = await handle.result()

    assert waiting.attention_reason is not None
    assert "still pending after 1 h (slow)" in waiting.attention_reason
    assert result.outcome == "cancelled"
    # Waiting on CI is not run time.
    assert waiting.hours_used < 0.1


async def test_a_cancel_while_ci_runs_ends_the_watch_and_the_run(
    client: Client, world: FakeWorld
) -> None:
    world.delivery.check_looks = [checks_pending("slow")] * 200
    world.script(1, [exits(0)])
    async with started_run(client, world, ci_spec()) as handle:
        seen = await eventually(
            lambda: status_of(handle), lambda s: s.ci is not None and s.ci.commit is not None
        )
        await eventually(lambda: _count(world.delivery.watches), lambda n: n >= 1)
        await handle.signal("cancel", "enough")
        result = await handle.result()

    assert seen.waiting_on is not None and seen.waiting_on.startswith("CI checks of ")
    assert seen.state == "finishing" and world.state_of(1) != "running"
    assert result.outcome == "cancelled" and result.pushed_commit is not None


async def test_a_run_waiting_on_ci_gives_its_admission_place_back(
    client: Client, time_skipping_env: WorkflowEnvironment
) -> None:
    async with pool_of_one(client, "a", "b") as worlds:
        a, b = worlds["a"], worlds["b"]
        a.delivery.check_looks = [checks_pending("slow")] * 3
        a.script(1, [exits(0)])
        waiter = await start(client, a, ci_spec())
        other = None
        try:
            await eventually(
                lambda: status_of(waiter), lambda s: s.ci is not None and s.ci.commit is not None
            )
            second = make_spec()
            b.script(1, [exits(0)])
            other = await start(client, b, second)
            # The place went to the other run while the first waited on CI.
            during = await eventually(
                lambda: places(client, a), lambda p: second.run_id in p.holding
            )
            other_result = await other.result()
            result = await waiter.result()
        finally:
            for handle in (waiter, other):
                await terminate(handle)

    assert during.holding.keys() == {second.run_id}
    assert other_result.outcome == "finished"
    assert result.outcome == "finished"
    assert a.paused == ["box-1"] and a.wakes == []


async def _count(items: list[object]) -> int:
    return len(items)
