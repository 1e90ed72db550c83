"""The time a run spends paused for its agent (questions and `wait_until`) has its own budget,
`Budget.max_wait_hours`: a wait is clipped to what is left of it, and past it the run needs a
person, its sandbox paused where it stands. Waiting was never run time, so before this budget
an agent asking again and again to wait (fresh ids, until 2099) kept its run alive for ever.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from fakes.activities import FakeWorld, Writes, progress
from overnight.core.models import Budget, BudgetExtension
from tests.workflows.harness import (
    eventually,
    keep_history,
    make_spec,
    started_run,
    status_of,
    until_state,
)
from tests.workflows.test_agent_run_talk import kit_checkpoint

# "Until 2099", on a test server whose clock earlier tests may have skipped past 2099.
FOREVER = timedelta(days=100 * 365)
# A run that stops at its wait budget makes a few dozen events; one that waits on and on,
# about 17 a wait.
MOST_EVENTS = 80


def fresh_waits(count: int, until: datetime) -> list[Writes]:
    """An agent that, each time it is woken, asks to wait until `until` again, with a new id."""
    stamp = until.isoformat()
    waits = [{"id": f"w{step}-q", "until": stamp, "reason": "quota"} for step in range(count)]
    return [progress(kit_checkpoint(step, wait=wait)) for step, wait in enumerate(waits)]


async def test_fresh_id_waits_until_2099_stop_at_the_wait_budget(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    world.script(1, fresh_waits(500, await time_skipping_env.get_current_time() + FOREVER))
    # The run hours clipped each wait before (0.03 h = 108 s) and were never used by one.
    spec = make_spec(budget=Budget(max_hours=0.03, max_wait_hours=2), attention_hours=1)
    async with started_run(client, world, spec) as handle:
        await eventually(lambda: status_of(handle), lambda s: bool(s.talk and s.talk.waiting_until))
        await time_skipping_env.sleep(timedelta(hours=2, minutes=1))
        attention = await until_state(handle, "needs_attention")
        events = len((await handle.fetch_history()).events)
        # Extended, the same agent is woken, asks to wait again, and waits the added hour.
        await handle.signal("extend_budget", BudgetExtension(wait_hours=1))
        await eventually(lambda: status_of(handle), lambda s: s.state == "running")
        await time_skipping_env.sleep(timedelta(hours=1, minutes=1))
        again = await until_state(handle, "needs_attention")
        # Nobody extends it again: it fails after attention_hours, as out of any budget.
        await time_skipping_env.sleep(timedelta(hours=1, minutes=1))
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        await keep_history(handle, "wait_budget_used_up")

    assert attention.attention_reason is not None
    assert attention.attention_reason.startswith("wait budget used up (2.00 of 2 h")
    assert attention.wait_hours_used == pytest.approx(2, abs=1 / 60)
    assert attention.hours_used < 0.03
    print(f"history events to the wait budget's end: {events}")
    assert events <= MOST_EVENTS, f"{events} events before it stopped"
    # One pause for the whole budget: not woken at its clipped end (the agent's time had not
    # come), paused where it stands; the extension woke the same agent once.
    assert world.paused == ["box-1", "box-1"] and world.wakes == ["box-1"]
    assert [a.request_id for a in world.answers] == []
    assert [start.process_id for start in world.starts] == ["agent-1-0"]
    assert again.wait_hours_used == pytest.approx(3, abs=1 / 60)
    assert again.budget.max_wait_hours == 3
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "OutOfBudget"
    assert "wait budget used up" in str(cause)
    assert world.notified().count("needs_attention") == 2


async def test_a_wait_extended_while_it_waits_waits_on_to_its_time(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    now = await time_skipping_env.get_current_time()
    wait = {"id": "w1-x", "until": (now + timedelta(hours=3)).isoformat(), "reason": "window"}
    world.script(1, [progress(kit_checkpoint(1, wait=wait))])
    spec = make_spec(budget=Budget(max_wait_hours=1))
    async with started_run(client, world, spec) as handle:
        paused = await eventually(
            lambda: status_of(handle), lambda s: bool(s.talk and s.talk.waiting_until)
        )
        await handle.signal("extend_budget", BudgetExtension(wait_hours=5))
        await time_skipping_env.sleep(timedelta(hours=3, minutes=1))
        woken = await eventually(lambda: status_of(handle), lambda s: bool(world.answers))
        await handle.cancel()
        # Ended whole: a run terminated under an activity holds the test server's clock.
        with pytest.raises(WorkflowFailureError):
            await handle.result()

    assert paused.talk is not None and paused.talk.waiting_until is not None
    assert abs(paused.talk.waiting_until - (now + timedelta(hours=1))) < timedelta(minutes=1)
    assert [(a.request_id, a.answer) for a in world.answers] == [("w1-x", "woken")]
    assert woken.state == "running" and world.wakes == ["box-1"]
    assert woken.wait_hours_used == pytest.approx(3, abs=1 / 60)
