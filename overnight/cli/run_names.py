"""One name for a run: every command takes its workflow id or its run id alike.

They differ only for a run started with a workflow id that is no valid run id (a plain
client's "Newbie From Python", a schedule's): its run id is derived from it (lowercased, a
short hash: `overnight.core.intake.derive_run_id`), which `status` shows and sandboxes carry. That
cannot be turned back, so a run id is found among the runs: first by the sandbox search
attribute (`{run_id}-{attempt}`), then, for a run without a sandbox yet, among the latest runs.
Every candidate is checked by deriving its run id again, so no other run is ever taken.
"""

from __future__ import annotations

import re

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from overnight.core.constants import SA_SANDBOX, WORKFLOW_TYPE
from overnight.core.intake import HASH_CHARS, derive_run_id

# A derived run id ends in `-` and its hash; any other valid run id is its workflow id too.
_DERIVED = re.compile(rf"^[a-z0-9][a-z0-9-]*-[0-9a-f]{{{HASH_CHARS}}}$")
# What a command's RUN_ID argument says in its --help.
RUN_NAME_HELP = "the run's id, or its workflow id (either names it)"
# How many of the latest runs are looked through for a run that has no sandbox yet.
SCAN_LIMIT = 2000


async def workflow_id_of(client: Client, name: str) -> str:
    """The workflow id of the run `name` names (its workflow id or its run id); `name` itself
    when no run has it (the caller's call then says no such run)."""
    if not _DERIVED.match(name) or await _exists(client, name):
        return name
    for query in (
        f"WorkflowType = '{WORKFLOW_TYPE}' AND {SA_SANDBOX} STARTS_WITH '{name}-'",
        f"WorkflowType = '{WORKFLOW_TYPE}'",
    ):
        found = await _first_deriving(client, query, name)
        if found is not None:
            return found
    return name


async def _exists(client: Client, workflow_id: str) -> bool:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def _first_deriving(client: Client, query: str, run_id: str) -> str | None:
    try:
        async for execution in client.list_workflows(query, limit=SCAN_LIMIT):
            if derive_run_id(execution.id) == run_id:
                return execution.id
    except RPCError as err:
        # A server without the search attribute (or STARTS_WITH) refuses the query: the next
        # query looks without it.
        if err.status != RPCStatusCode.INVALID_ARGUMENT:
            raise
    return None
