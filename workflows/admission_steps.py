"""AgentRun's admission steps: before its first sandbox, a run on a pool that limits runs
(overnight/admission.py) asks the pool's `OvernightAdmission` workflow for a place and waits in
state `queued`, with nothing made and nothing spent, until the pool lets it in (the `admitted`
signal); on every way out it gives its place back. A run that ends otherwise (terminated,
timed out) has its place taken back by the admission workflow, which looks.

Workflow code (activities through `admission_calls`).
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from overnight.admission import RELEASE_SIGNAL, request_for
    from workflows import admission_calls
    from workflows.patches import ADMISSION_PATCH
    from workflows.state import SupervisorState


async def admitted(s: SupervisorState, publish: Callable[[SupervisorState], None]) -> bool:
    """Wait in `queued` for a place when the run must ask for one. False: it was cancelled
    while it waited (nothing was made; the caller ends the run, which gives the turn back)."""
    terms = s.admission
    if terms is None or s.admitted or not workflow.patched(ADMISSION_PATCH):
        return True
    s.state = "queued"
    # Time in the queue is not the run's time: `max_hours` counts from its admission, as it
    # leaves out time waiting for a person (budget.hours_used).
    s.attention_since = workflow.now()
    publish(s)
    request = request_for(terms, workflow.info().workflow_id, s.spec)
    await admission_calls.request_admission(terms, request)
    await workflow.wait_condition(lambda: s.admitted or s.cancel_requested)
    s.attention_seconds += (workflow.now() - s.attention_since).total_seconds()
    s.attention_since = None
    return not s.cancel_requested


async def give_back(s: SupervisorState) -> None:
    """The run is ending: its place, or its turn in the queue, goes back to the pool. Once."""
    terms = s.admission
    if terms is None:
        return
    s.admission = None
    s.admitted = False
    pool = workflow.get_external_workflow_handle(terms.workflow_id)
    try:
        await pool.signal(RELEASE_SIGNAL, workflow.info().workflow_id)
    except FailureError as err:
        # No admission workflow runs (someone ended it): no place is held to give back.
        workflow.logger.warning("could not give the place back: %s", err)
