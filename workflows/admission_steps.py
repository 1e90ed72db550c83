"""AgentRun's admission steps: before its first sandbox, a run on a pool that limits runs
(overnight/core/admission.py) asks the pool's `OvernightAdmission` workflow for a place and waits in
state `queued`, with nothing made and nothing spent, until the pool lets it in (the `admitted`
signal); on every way out it gives its place back. Paused for its agent longer than
`STEP_OUT_AFTER` (a question, a wait), it gives the place back meanwhile and queues again,
its sandbox still paused, before it wakes. A run that ends otherwise (terminated,
timed out) has its place taken back by the admission workflow, which looks.

Workflow code (activities through `workflows.calls.admission`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from overnight.core.admission import RELEASE_SIGNAL, AdmissionTerms, request_for
    from workflows.calls import admission
    from workflows.patches import ADMISSION_PATCH
    from workflows.pure.state import SupervisorState

# A run paused this long for its agent (a question unanswered, a wait) gives its place back,
# and asks again before its sandbox wakes (runs begun with `WAIT_BUDGET_PATCH`). Shorter
# pauses keep it: a place given back and asked for again costs a round trip through the pool
# (about a dozen history events) and maybe a turn in its queue.
STEP_OUT_AFTER = timedelta(minutes=5)


async def admitted(s: SupervisorState, publish: Callable[[SupervisorState], None]) -> bool:
    """Wait in `queued` for a place when the run must ask for one. False: it was cancelled
    while it waited (nothing was made; the caller ends the run, which gives the turn back)."""
    terms = s.pool.admission
    if terms is None or s.pool.admitted or not workflow.patched(ADMISSION_PATCH):
        return True
    s.state = "queued"
    # Time in the queue is not the run's time: `max_hours` counts from its admission, as it
    # leaves out time waiting for a person (budget.hours_used).
    s.attention.attention_since = workflow.now()
    publish(s)
    request = request_for(terms, workflow.info().workflow_id, s.spec)
    await admission.request_admission(terms, request)
    await workflow.wait_condition(lambda: s.pool.admitted or s.cancel_requested)
    s.attention.attention_seconds += (workflow.now() - s.attention.attention_since).total_seconds()
    s.attention.attention_since = None
    return not s.cancel_requested


def holds_place(s: SupervisorState) -> bool:
    """The run holds a place it may give back for a long wait."""
    return (
        s.kit.wait_budget_kept
        and s.pool.admission is not None
        and s.pool.admitted
        and not s.pool.stepped_out
    )


def step_out_at(s: SupervisorState, paused_since: datetime | None) -> datetime | None:
    """When a pause begun at `paused_since` gives the run's place back (None: it holds none)."""
    if paused_since is None or not holds_place(s):
        return None
    return paused_since + STEP_OUT_AFTER


async def step_out(s: SupervisorState) -> None:
    """Paused for long, the run gives its place back (its sandbox stays paused: on Runtime a
    paused sandbox costs nothing; locally it keeps its disk) and asks again before it wakes."""
    terms = s.pool.admission
    if terms is None or not holds_place(s):
        return
    # Before the signal: the admission workflow asks the run (`in_pool`) whether it is out.
    s.pool.stepped_out = True
    s.pool.admitted = False
    await _release(terms)


async def back_in(s: SupervisorState, publish: Callable[[SupervisorState], None]) -> bool:
    """A run that gave its place back waits in `queued` for one again, its sandbox paused,
    before it wakes. False: it was cancelled meanwhile."""
    terms = s.pool.admission
    if not s.pool.stepped_out or terms is None:
        return True
    s.pool.stepped_out = False
    s.pool.admitted = False
    before = s.state
    s.state = "queued"
    # The queue's time is neither run time nor a wait of the agent's (as the first queue's).
    counting = s.attention.attention_since is None
    if counting:
        s.attention.attention_since = workflow.now()
    publish(s)
    request = request_for(terms, workflow.info().workflow_id, s.spec)
    await admission.request_admission(terms, request)
    await workflow.wait_condition(lambda: s.pool.admitted or s.cancel_requested)
    if counting and s.attention.attention_since is not None:
        s.attention.attention_seconds += (
            workflow.now() - s.attention.attention_since
        ).total_seconds()
        s.attention.attention_since = None
    s.state = before
    return not s.cancel_requested


async def give_back(s: SupervisorState) -> None:
    """The run is ending: its place, or its turn in the queue, goes back to the pool. Once."""
    terms = s.pool.admission
    if terms is None:
        return
    s.pool.admission = None
    s.pool.admitted = False
    await _release(terms)


async def _release(terms: AdmissionTerms) -> None:
    pool = workflow.get_external_workflow_handle(terms.workflow_id)
    try:
        await pool.signal(RELEASE_SIGNAL, workflow.info().workflow_id)
    except FailureError as err:
        # No admission workflow runs (someone ended it): no place is held to give back.
        workflow.logger.warning("could not give the place back: %s", err)
