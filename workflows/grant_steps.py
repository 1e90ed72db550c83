"""AgentRun asks its worker whether it grants what the spec asks for (isolation none, secrets,
binds, host ports: overnight/grants.py), before anything is made.

Workflow code (the check is a local activity, through `calls`).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from overnight.admission import AdmissionTerms
    from overnight.grants import SPEC_REFUSED, refusal_message
    from overnight.models import RunSpec
    from workflows import calls


async def refuse_unless_granted(spec: RunSpec) -> AdmissionTerms | None:
    """Fail the run at once, as a non-retryable `SpecRefused` naming each field, when the
    worker does not grant what `spec` asks for; else what the run must ask its pool for
    before it makes anything (None: nothing, workflows/admission_steps.py)."""
    checked = await calls.check_spec(spec)
    if checked.refusals:
        message = refusal_message(checked.refusals)
        workflow.logger.warning("spec refused by the worker: %s", message)
        raise ApplicationError(message, type=SPEC_REFUSED, non_retryable=True)
    return checked.admission
