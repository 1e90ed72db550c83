"""A week-long run, and what the Web UI shows: continue-as-new, the run card, search attributes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

from temporalio.api.enums.v1 import EventType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowHistory
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from fakes.activities import FakeWorld, Quiet, Step, exits, note, progress
from overnight.core.constants import (
    SA_LAST_PROGRESS,
    SA_RESTARTS,
    SA_SANDBOX,
    SA_STATE,
    SEARCH_ATTRIBUTE_TYPES,
)
from overnight.core.models import Budget, BudgetExtension, RunSpec
from overnight.worker.devserver import indexed_value_type
from tests.workflows.harness import (
    eventually,
    make_spec,
    run_histories,
    started_run,
    status_of,
    until_idle,
    until_state,
)
from workflows.agent_run import AgentRun
from workflows.pure import budget
from workflows.pure.state import SupervisorState

HISTORY_EVENT_LIMIT = 10_240
WEEK_OF_TEN_MINUTE_LOOKS = 7 * 24 * 6


def busy_week() -> Iterator[Step]:
    """Quiet looks (ten minutes each), a new checkpoint every fourth one; done after a week."""
    for n in range(WEEK_OF_TEN_MINUTE_LOOKS):
        yield Quiet()
        if n % 4 == 3:
            yield progress(note(f"step {n + 1}", f"step {n} done"))
    yield exits(0, final=note("done", "all steps done"))


async def test_week_long_run_continues_as_new_and_keeps_every_history_short(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, busy_week())
    spec = make_spec(poll_seconds=60, stall_seconds=3600, budget=Budget(max_hours=7 * 24 + 1))
    async with started_run(client, world, spec) as handle:
        first = await until_state(handle, "running")
        await handle.signal("extend_budget", BudgetExtension(hours=2, restarts=1))
        result = await handle.result()
        final = await status_of(handle)
        runs = await run_histories(client, spec.run_id, handle.first_execution_run_id)

    lengths = [len(history.events) for history in runs]
    assert len(lengths) >= 2, lengths
    assert all(length < HISTORY_EVENT_LIMIT for length in lengths), lengths
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert result.checkpoint == note("done", "all steps done")
    assert 7 * 24 - 0.01 < result.hours_used < 7 * 24 + 0.5  # a week (rounded, no bound on it)
    # Each run hands the next the whole state: one start time, one budget, one sandbox, and
    # the checkpoint so far.
    extended = Budget(max_restarts=6, max_hours=7 * 24 + 3)
    carried = [_carried_state(history) for history in runs[:-1]]
    for state in carried:
        assert state.started_at == first.started_at
        assert (state.budget, state.attempt, state.sandbox_id) == (extended, 1, "box-1")
        assert state.progress.checkpoint is not None and state.progress.checkpoint.startswith(
            '{"next": "step'
        )
    hours = [
        budget.hours_used(state, _ended_at(history))
        for state, history in zip(carried, runs[:-1], strict=True)
    ]
    assert hours == sorted(hours) and hours[-1] < 7 * 24
    assert (final.state, final.started_at, final.budget) == ("finished", first.started_at, extended)
    assert len(world.starts) == 1  # one sandbox, one agent process, all week
    # A run that continued as new, and the run it handed over to, replay on their own.
    replayer = Replayer(workflows=[AgentRun], data_converter=pydantic_data_converter)
    for history in runs[-2:]:
        await replayer.replay_workflow(history)


def _carried_state(history: WorkflowHistory) -> SupervisorState:
    """The state a run handed to its successor (the continue-as-new input)."""
    event = history.events[-1]
    assert event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    payloads = event.workflow_execution_continued_as_new_event_attributes.input.payloads
    # A run begun with STATE_GROUPED_PATCH hands its state on grouped by concern.
    shape = json.loads(payloads[1].data)
    assert shape["grouped"] is True and "checkpoint" in shape["progress"]
    _, state = pydantic_data_converter.payload_converter.from_payloads(
        payloads, [RunSpec, SupervisorState]
    )
    assert isinstance(state, SupervisorState)
    return state


def _ended_at(history: WorkflowHistory) -> datetime:
    return history.events[-1].event_time.ToDatetime(tzinfo=UTC)


async def test_run_card_shows_state_attempt_next_step_and_budget(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress(note("write the parser", "read the spec")), exits(1)])
    world.script(2, [progress(note("write the tests", "parser done"))])
    async with started_run(client, world, make_spec()) as handle:
        await eventually(lambda: status_of(handle), lambda s: s.attempt == 2)
        await eventually(
            lambda: status_of(handle),
            lambda s: (
                s.checkpoint_summary is not None and s.checkpoint_summary.next == "write the tests"
            ),
        )
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        await until_idle(world)
        await handle.signal("cancel")
        await handle.result()

    card = metadata.current_details
    assert "**running**" in card
    assert "**attempt** 2" in card and "`box-2`" in card
    assert "**next step** write the tests" in card
    assert "**restarts** 1/5" in card
    assert "**last restart** attempt 1: agent crashed (exit 1)" in card


async def test_missing_search_attributes_never_break_a_run(
    client: Client, world: FakeWorld
) -> None:
    world.search_attributes = []  # the namespace has none of them (true of the test server)
    world.script(1, [progress("cp-1"), exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()
        description = await handle.describe()

    assert result.outcome == "finished"
    info = description.raw_description.workflow_execution_info
    assert SA_STATE not in info.search_attributes.indexed_fields


async def test_failing_search_attribute_check_never_breaks_a_run(
    client: Client, world: FakeWorld
) -> None:
    world.search_attributes = None  # the check activity fails
    world.script(1, [progress("cp-1"), exits(1)])
    world.script(2, [exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()

    assert (result.outcome, result.restarts) == ("finished", 1)


async def test_registered_search_attributes_follow_the_run(
    private_env: WorkflowEnvironment, world: FakeWorld
) -> None:
    client = private_env.client
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=client.namespace,
            search_attributes={
                name: indexed_value_type(kind) for name, kind in SEARCH_ATTRIBUTE_TYPES.items()
            },
        )
    )
    world.search_attributes = list(SEARCH_ATTRIBUTE_TYPES)
    world.script(1, [progress("cp-1"), exits(1)])
    world.script(2, [progress("cp-2"), exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()
        found = (await handle.describe()).typed_search_attributes

    assert result.outcome == "finished"
    assert found.get(SearchAttributeKey.for_keyword(SA_STATE)) == "finished"
    assert found.get(SearchAttributeKey.for_int(SA_RESTARTS)) == 1
    assert found.get(SearchAttributeKey.for_keyword(SA_SANDBOX)) == "box-2"
    assert found.get(SearchAttributeKey.for_datetime(SA_LAST_PROGRESS)) is not None
