"""A run's first step: its input accepted (or refused as `InvalidSpec`) and, for a run that
begins here rather than carries on after continue-as-new, the behaviours its patch markers
give it. The markers are asked in the order runs have always asked them."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows import intake
    from workflows.notify_steps import NOTIFY_PATCH
    from workflows.patches import (
        AGENT_REQUESTS_PATCH,
        FAIL_FAST_PATCH,
        HOST_QUEUES_PATCH,
        LEASE_END_EITHER_PATCH,
        LEASE_KEEPING_PATCH,
        LOOP_EXIT_PATCH,
        REQUESTS_FILE_PATCH,
        RUN_ID_MATCH_PATCH,
        SAFETY_NET_PATCH,
        TALK_MARKS_APART_PATCH,
        WAIT_BUDGET_PATCH,
    )
    from workflows.state import SupervisorState


def begin(spec: Any, carried: Any, lean: bool) -> tuple[SupervisorState, bool]:
    """The run's state, and whether the run begins here (False: carried on). `lean`: the run
    has every marker before `LEAN_WRITES_PATCH` without asking them one by one."""
    # Runs begun before run ids had to match their workflow id are not refused on replay.
    match_id = lean or workflow.patched(RUN_ID_MATCH_PATCH)
    try:
        accepted = intake.accept_spec(spec, workflow.info().workflow_id, require_match=match_id)
        kept = None if carried is None else intake.accept_carried(carried)
    except intake.InvalidInput as bad:
        raise ApplicationError(str(bad), type="InvalidSpec", non_retryable=True) from None
    if kept is not None:
        return kept, False
    s = SupervisorState(spec=accepted, budget=accepted.budget, started_at=workflow.now())
    s.lease_keeping = lean or workflow.patched(LEASE_KEEPING_PATCH)
    s.notifying = lean or workflow.patched(NOTIFY_PATCH)
    s.agent_requests = workflow.patched(AGENT_REQUESTS_PATCH)
    s.safety_net_kept = workflow.patched(SAFETY_NET_PATCH)
    s.talk_marks_apart = workflow.patched(TALK_MARKS_APART_PATCH)
    s.wait_budget_kept = workflow.patched(WAIT_BUDGET_PATCH)
    s.requests_file = workflow.patched(REQUESTS_FILE_PATCH)
    # Only coding agents' runs ask it (no run begun before `agent` existed has one).
    s.loop_exit = accepted.agent is not None and workflow.patched(LOOP_EXIT_PATCH)
    s.host_routing = workflow.patched(HOST_QUEUES_PATCH)
    s.fail_fast = workflow.patched(FAIL_FAST_PATCH)
    s.lease_end_either = workflow.patched(LEASE_END_EITHER_PATCH)
    return s, True
