"""What a run publishes for the console's runs list (issue 52): its owner, agent kind and
labels as search attributes, in the upsert it makes anyway, and its row in the memo, written
as it changes and at most every 10 minutes for what only grows (spend, hours, the next step)."""

from __future__ import annotations

import json
from datetime import timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.testing import WorkflowEnvironment

from fakes.activities import FakeWorld, Quiet, Step, exits, progress
from overnight.core.constants import (
    ROW_MEMO_KEY,
    SA_AGENT,
    SA_LABELS,
    SA_OWNER,
    SEARCH_ATTRIBUTE_TYPES,
)
from overnight.core.run_row import row_from_memo
from overnight.worker.devserver import indexed_value_type
from tests.workflows.harness import keep_history, make_spec, started_run
from workflows.patches import ROW_PATCH


async def _register(client: Client, world: FakeWorld) -> None:
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=client.namespace,
            search_attributes={
                name: indexed_value_type(kind) for name, kind in SEARCH_ATTRIBUTE_TYPES.items()
            },
        )
    )
    world.search_attributes = list(SEARCH_ATTRIBUTE_TYPES)


def _checkpoint(n: int) -> str:
    return json.dumps({"next": f"step {n + 1}", "notes": [f"did step {n}"]})


async def test_a_run_publishes_its_filters_once_and_its_row_at_most_every_ten_minutes(
    private_env: WorkflowEnvironment, world: FakeWorld
) -> None:
    client = private_env.client
    await _register(client, world)
    # A checkpoint a minute for an hour (each look waits its poll), then the agent finishes.
    steps: list[Step] = []
    for n in range(60):
        steps += [progress(_checkpoint(n)), Quiet()]
    world.script(1, [*steps, exits(0)])
    spec = make_spec(owner="team-web", labels=["nightly", "team:web"], poll_seconds=60)
    async with started_run(client, world, spec) as handle:
        result = await handle.result()
        described = await handle.describe()
        history = await handle.fetch_history()
        await keep_history(handle, "console_row")

    assert result.outcome == "finished"
    found = described.typed_search_attributes
    assert found.get(SearchAttributeKey.for_keyword(SA_OWNER)) == "team-web"
    assert found.get(SearchAttributeKey.for_keyword(SA_AGENT)) == "own"
    assert found.get(SearchAttributeKey.for_keyword_list(SA_LABELS)) == ["nightly", "team:web"]
    row = row_from_memo((await described.memo())[ROW_MEMO_KEY])
    assert row is not None
    assert (row.state, row.attempt, row.next_step) == ("finished", 1, "step 60")
    assert row.max_hours == spec.budget.max_hours and row.hours_used > 0.9

    events = list(history.events)
    markers = [
        e.marker_recorded_event_attributes.SerializeToString()
        for e in events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
    ]
    assert any(ROW_PATCH.encode() in marker for marker in markers)
    upserts = [
        e for e in events if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    ]
    # The static three ride in the first upsert: no event of their own.
    assert [
        SA_OWNER
        in e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        for e in upserts
    ].count(True) == 1
    rows = [e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED]
    hours = (events[-1].event_time.ToDatetime() - events[0].event_time.ToDatetime()) / timedelta(
        hours=1
    )
    # 60 checkpoints in the hour: the row is written at the start, the states it passes
    # through, and every 10 minutes, not at each checkpoint.
    assert hours >= 1
    assert len(rows) <= 6 * hours + 6, (len(rows), hours)
    print(f"row writes: {len(rows)} in {hours:.2f} h; search attribute upserts: {len(upserts)}")


async def test_a_run_without_the_new_search_attributes_still_keeps_its_row(
    private_env: WorkflowEnvironment, world: FakeWorld
) -> None:
    client = private_env.client
    world.search_attributes = []  # a namespace that registered none of them
    world.script(1, [progress(_checkpoint(0)), exits(0)])
    spec = make_spec(owner="team-web", labels=["nightly"])
    async with started_run(client, world, spec) as handle:
        result = await handle.result()
        described = await handle.describe()

    assert result.outcome == "finished"
    assert SA_OWNER not in described.search_attributes
    row = row_from_memo((await described.memo())[ROW_MEMO_KEY])
    assert row is not None and row.state == "finished"
