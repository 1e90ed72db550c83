"""What a run writes to the server: the namespace's search attributes asked through a local
activity (the worker's cache), OvernightLastProgress upserted with state changes or when the
one shown is 10 minutes old, not on every checkpoint."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.common import SearchAttributeKey
from temporalio.testing import WorkflowEnvironment

from fakes.activities import FakeWorld, Quiet, exits, progress
from overnight.core.constants import SA_LAST_PROGRESS, SA_STATE, SEARCH_ATTRIBUTE_TYPES
from overnight.worker.devserver import indexed_value_type
from tests.workflows.harness import keep_history, make_spec, started_run, status_of


async def test_last_progress_is_upserted_with_state_changes_or_every_ten_minutes(
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
    # Five checkpoints at once, a quiet look (the next wake, 10 min on), five more, another
    # quiet look, one more, then the agent finishes.
    burst = [progress(f"cp-{n}") for n in range(5)]
    later = [progress(f"cp-{n}") for n in range(5, 10)]
    world.script(1, [*burst, Quiet(), *later, Quiet(), progress("cp-last"), exits(0)])
    spec = make_spec(stall_seconds=3600)
    async with started_run(client, world, spec) as handle:
        result = await handle.result()
        status = await status_of(handle)
        found = (await handle.describe()).typed_search_attributes
        history = await handle.fetch_history()
        await keep_history(handle, "lean_writes")

    assert result.outcome == "finished"
    events = list(history.events)
    checks = [
        e
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name
        == "check_search_attributes"
    ]
    assert checks == []  # a local activity: a marker, no activity task
    markers = [e for e in events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    assert any(
        m.marker_recorded_event_attributes.marker_name == "core_local_activity" for m in markers
    )
    progress_upserts = [
        e
        for e in events
        if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
        and SA_LAST_PROGRESS
        in e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
    ]
    # Running (with the state), 10 min on, 20 min on: 11 checkpoints, 3 upserts.
    assert len(progress_upserts) == 3
    assert found.get(SearchAttributeKey.for_keyword(SA_STATE)) == "finished"
    shown = found.get(SearchAttributeKey.for_datetime(SA_LAST_PROGRESS))
    assert shown is not None and status.last_progress_at is not None
    assert abs((shown - status.last_progress_at).total_seconds()) < 1
