"""AgentRun asks its worker whether it grants what the spec asks for (isolation none, secrets,
binds, host ports: overnight/grants.py), before anything is made.

Workflow code (the check is a local activity, through `calls`).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from overnight.grants import SPEC_REFUSED, refusal_message
    from workflows import calls
    from workflows.state import SupervisorState


async def refuse_unless_granted(s: SupervisorState) -> None:
    """Fail the run at once, as a non-retryable `SpecRefused` naming each field, when the
    worker does not grant what its spec asks for; else keep what the run must ask its pool
    for before it makes anything (`admission`; None: nothing, workflows/admission_steps.py)
    and, for a run pinned to hosts, the worker's lost threshold (workflows.hosts)."""
    checked = await calls.check_spec(s.spec)
    if checked.refusals:
        message = refusal_message(checked.refusals)
        workflow.logger.warning("spec refused by the worker: %s", message)
        s.state, s.failure = "failed", message  # what `status` says of it (no command)
        raise ApplicationError(message, type=SPEC_REFUSED, non_retryable=True)
    s.admission = checked.admission
    if checked.host_lost_seconds is not None:
        s.host_lost_seconds = checked.host_lost_seconds
