"""What a run's history says of it, read by the CLI and by the worker's scheduled reap."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from overnight.core.errors import OvernightError, RunNotFound
from overnight.core.models import RunSpec


async def run_spec(client: Client, run_id: str) -> RunSpec:
    """The run's spec, from the start event of its latest run (continue-as-new keeps it)."""
    from overnight.core.intake import InvalidInput, accept_spec

    handle = client.get_workflow_handle(run_id)
    try:
        async for event in handle.fetch_history_events(page_size=1):
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            # Through the client's codec too: an encrypted run's spec is read like any other.
            [raw] = await client.data_converter.decode([payloads[0]])
            try:
                return accept_spec(raw, run_id, require_match=False)
            except InvalidInput as bad:
                raise OvernightError(f"run {run_id!r} has no usable spec: {bad}") from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RunNotFound(run_id) from None
        raise
    raise RunNotFound(run_id)
