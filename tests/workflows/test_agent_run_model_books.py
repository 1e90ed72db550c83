"""A run whose model calls go through the worker's gateway (issue 49) counts the gateway's
books, not its agent's word:

- a coding agent whose spec names its vendor's key in `secret_env` is metered: the create is
  given the run's allowance for model calls, the budget counts what the gateway booked, the
  sandbox is paused in place at the budget, and `extend --spend` sets the gateway's cap again
  before the same agent is woken;
- a spec whose key the gateway does not hold (an agent of one's own with no
  `model_credential`) counts what its agent reports, as before.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from fakes.activities import Books, FakeWorld, exits, progress
from overnight.core.models import BudgetExtension, RunSpec
from tests.workflows.harness import (
    eventually,
    keep_history,
    make_spec,
    started_run,
    status_of,
    until_idle,
)

FREE_SANDBOXES = {"vcpu_hour_usd": 0, "gib_hour_usd": 0}


def metered_spec(**overrides: Any) -> RunSpec:
    return RunSpec(
        run_id=f"run-{uuid.uuid4().hex[:12]}",
        repo="file:///tmp/repo",
        agent={"kind": "claude-code", "prompt": "Make the tests pass"},
        secret_env=["ANTHROPIC_API_KEY"],
        rates=FREE_SANDBOXES,
        **overrides,
    )


async def test_the_gateways_books_are_the_spend_and_an_extension_lifts_its_cap_before_the_wake(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), Books(1.1, cap_refusals=1), exits(0)])
    spec = metered_spec(budget={"max_spend_usd": 1})
    async with started_run(client, world, spec) as handle:
        held = await eventually(lambda: status_of(handle), lambda s: s.state == "needs_attention")
        await until_idle(world)
        await handle.signal("extend_budget", BudgetExtension(spend_usd=1))
        result = await handle.result()
        await keep_history(handle, "gateway_model_spend")

    [create] = world.create_inputs
    assert create.model_allowance_usd == pytest.approx(1.0)
    assert held.spend_model_source == "gateway"
    assert held.spend_model_usd == pytest.approx(1.1)
    assert held.model_calls_capped == 1
    assert "spend budget used up ($1.10 of $1.00)" in (held.attention_reason or "")
    # Paused in place; the cap set again from the new budget before the same sandbox woke.
    assert world.log.index("pause box-1") < world.log.index("cap box-1 2.0")
    assert world.caps == [("box-1", 2.0, 0)] and world.wakes == ["box-1"]
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert result.spend_model_usd == pytest.approx(1.1)
    assert result.spend_model_source == "gateway"
    # Every look asked the host for the run's books.
    assert all(look.model_books_of == spec.run_id for look in world.observed)


async def test_a_run_whose_key_the_gateway_does_not_hold_counts_what_its_agent_reports(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [Books(5.0), exits(0)])
    async with started_run(client, world, make_spec(rates=FREE_SANDBOXES)) as handle:
        result = await handle.result()

    assert [create.model_allowance_usd for create in world.create_inputs] == [None]
    assert all(look.model_books_of is None for look in world.observed)
    assert (result.spend_model_usd, result.spend_model_source) == (0, "agent")
    assert not any(entry.startswith("cap ") for entry in world.log)


async def test_the_same_request_eight_times_at_the_gateway_restarts_the_agent_once(
    client: Client, world: FakeWorld
) -> None:
    # The adapter counts tool calls; an agent's own code calling its model in a loop is seen
    # only at the gateway. Acted on once per body: the next sandbox's books still show it.
    looping = Books(0.1, repeats=8, body="b" * 64)
    world.script(1, [progress("cp-1"), Books(0.05, repeats=7, body="b" * 64), looping])
    world.script(2, [looping, exits(0)])
    async with started_run(client, world, metered_spec()) as handle:
        result = await handle.result()
        status = await status_of(handle)

    assert (result.outcome, result.attempts, result.restarts) == ("finished", 2, 1)
    [restart] = status.restarts
    assert restart.reason == (
        "model loop: the same model request 8 times in a row (counted at the gateway)"
    )


async def test_a_look_back_early_with_grown_books_is_news_and_the_next_look_starts_at_once(
    client: Client, world: FakeWorld
) -> None:
    # The look comes back as soon as the gateway booked a model call; the agent exits right
    # after (a CLI's last answer). A quiet look back early is waited out on a timer to the
    # next wake (the stall deadline), blind to the exit: grown books are not quiet.
    world.script(1, [progress("cp-1"), Books(0.01), exits(0)])
    async with started_run(client, world, metered_spec(stall_seconds=900)) as handle:
        result = await handle.result()
        history = await handle.fetch_history()
        await keep_history(handle, "gateway_books_news")

    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert len(world.observed) == 3  # the write, the books, the exit
    waits = [
        event.user_metadata.summary.data.decode()
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED
    ]
    assert not any("quiet agent" in wait for wait in waits), waits
