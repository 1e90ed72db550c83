"""A run's first steps: its input accepted (or refused as `InvalidSpec`), the behaviours its
patch markers give a run that begins here rather than carries on after continue-as-new, and
its worker's word on what the spec asks for (isolation none, secrets, binds, host ports:
overnight/core/grants.py), before anything is made."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from overnight.core.hosts import host_bound

with workflow.unsafe.imports_passed_through():
    from overnight.core.grants import SPEC_REFUSED, refusal_message
    from overnight.core.intake import InvalidInput, accept_spec
    from overnight.core.specs import describe_errors
    from workflows.calls import sandbox
    from workflows.patches import (
        AGENT_REQUESTS_PATCH,
        FAIL_FAST_PATCH,
        FINISHED_PUSHED_PATCH,
        HOST_FLOOR_PATCH,
        HOST_QUEUES_PATCH,
        LEASE_END_EITHER_PATCH,
        LEASE_KEEPING_PATCH,
        LOOP_EXIT_PATCH,
        NOTIFY_PATCH,
        PROGRESS_IS_CHECKPOINTS_PATCH,
        REQUESTS_FILE_PATCH,
        RUN_ID_MATCH_PATCH,
        SAFETY_NET_PATCH,
        STATE_GROUPED_PATCH,
        TALK_MARKS_APART_PATCH,
        WAIT_BUDGET_PATCH,
    )
    from workflows.pure.state import SupervisorState


def begin(spec: Any, carried: Any, lean: bool) -> tuple[SupervisorState, bool]:
    """The run's state, and whether the run begins here (False: carried on). `lean`: the run
    has every marker before `LEAN_WRITES_PATCH` without asking them one by one. The markers
    are asked in the order runs have always asked them."""
    # Runs begun before run ids had to match their workflow id are not refused on replay.
    match_id = lean or workflow.patched(RUN_ID_MATCH_PATCH)
    try:
        accepted = accept_spec(spec, workflow.info().workflow_id, require_match=match_id)
        kept = None if carried is None else accept_carried(carried)
    except InvalidInput as bad:
        raise ApplicationError(str(bad), type="InvalidSpec", non_retryable=True) from None
    if kept is not None:
        return kept, False
    s = SupervisorState(spec=accepted, budget=accepted.budget, started_at=workflow.now())
    s.sandbox.lease_keeping = lean or workflow.patched(LEASE_KEEPING_PATCH)
    s.notifying = lean or workflow.patched(NOTIFY_PATCH)
    s.kit.agent_requests = workflow.patched(AGENT_REQUESTS_PATCH)
    s.net.safety_net_kept = workflow.patched(SAFETY_NET_PATCH)
    s.kit.talk_marks_apart = workflow.patched(TALK_MARKS_APART_PATCH)
    s.kit.wait_budget_kept = workflow.patched(WAIT_BUDGET_PATCH)
    s.kit.requests_file = workflow.patched(REQUESTS_FILE_PATCH)
    # Only coding agents' runs ask it (no run begun before `agent` existed has one).
    s.attempts.loop_exit = accepted.agent is not None and workflow.patched(LOOP_EXIT_PATCH)
    s.hosts.host_routing = workflow.patched(HOST_QUEUES_PATCH)
    s.fail_fast = workflow.patched(FAIL_FAST_PATCH)
    s.sandbox.lease_end_either = workflow.patched(LEASE_END_EITHER_PATCH)
    # Only local runs ask it (a Runtime sandbox is never paused for the worker's disk).
    s.sandbox.host_floor_kept = host_bound(accepted.provider) and workflow.patched(HOST_FLOOR_PATCH)
    s.delivery.finish_pushes = workflow.patched(FINISHED_PUSHED_PATCH)
    s.progress.progress_is_checkpoints = workflow.patched(PROGRESS_IS_CHECKPOINTS_PATCH)
    # What it hands on at continue-as-new is grouped; a run begun before goes on flat.
    s.grouped = workflow.patched(STATE_GROUPED_PATCH)
    return s, True


def accept_carried(raw: Any) -> SupervisorState:
    """The state a continued run carries (continue-as-new), validated: input that does not
    validate is refused with one line, so the run fails at once instead of its task forever."""
    try:
        return SupervisorState.model_validate(raw)
    except ValidationError as err:
        raise InvalidInput(describe_errors(err, "carried state", SupervisorState)) from None


async def refuse_unless_granted(s: SupervisorState) -> None:
    """Fail the run at once, as a non-retryable `SpecRefused` naming each field, when the
    worker does not grant what its spec asks for; else keep what the run must ask its pool
    for before it makes anything (`admission`; None: nothing, workflows/admission_steps.py)
    and, for a run pinned to hosts, the worker's lost threshold (workflows.pure.hosts)."""
    checked = await sandbox.check_spec(s.spec)
    if checked.refusals:
        message = refusal_message(checked.refusals)
        workflow.logger.warning("spec refused by the worker: %s", message)
        s.state, s.failure = "failed", message  # what `status` says of it (no command)
        raise ApplicationError(message, type=SPEC_REFUSED, non_retryable=True)
    s.pool.admission = checked.admission
    if not checked.holds_work:
        s.delivery.finish_pushes = False  # virtual agents (a fake provider's): no work to push
    if checked.host_lost_seconds is not None:
        s.hosts.host_lost_seconds = checked.host_lost_seconds
