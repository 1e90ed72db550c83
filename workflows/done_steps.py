"""AgentRun's done check: the checks run after the agent exits 0 (`done_when_in_place` in its
sandbox, then `done_when` against its pushed work in a sandbox of their own:
workflows/done_sandbox_steps.py), and the agent started again in its sandbox with the one
that failed.

Workflow code (the activities through `calls`); the decisions are in `workflows.pure.done` and
`decide.after_done_checks`. Behind `DONE_CHECKS_PATCH`, asked only by runs with checks; the
sandbox of their own behind `DONE_CHECKS_FRESH_PATCH`, asked only by runs with `done_when`.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from overnight.core.done_check import DoneCheck
    from workflows import done_sandbox_steps, host_steps, kit_request_steps, lease_steps
    from workflows.calls import done_checks, outcomes, sandbox
    from workflows.patches import DONE_CHECKS_FRESH_PATCH, DONE_CHECKS_PATCH
    from workflows.pure import done
    from workflows.pure.decide import (
        Decision,
        DoneRound,
        Finish,
        after_done_checks,
        restart_within_budget,
    )
    from workflows.pure.run_record import note_started_again
    from workflows.pure.state import SupervisorState

Publish = Callable[[SupervisorState], None]


async def after_exit_zero(s: SupervisorState, publish: Publish) -> Decision | None:
    """The agent exited 0: `Finish` when it has no checks or they all pass, else what follows
    a failed one (None: the run was cancelled meanwhile)."""
    if not done.wanted(s) or not workflow.patched(DONE_CHECKS_PATCH):
        return Finish()
    assert s.sandbox_id is not None
    if s.sandbox.sandbox_paused and not await kit_request_steps.wake_in_place(
        s, "the agent finished: its done check", agent_ended=True
    ):
        why = "sandbox paused as its agent finished could not be woken for the done check"
        return restart_within_budget(s, why, workflow.now())
    round_number = s.done.done_checks_used + 1
    checks: list[DoneCheck] = []
    s.done.done_results = checks  # the status shows the round as it goes
    fresh = bool(s.spec.done_when) and workflow.patched(DONE_CHECKS_FRESH_PATCH)
    for check in done.in_place_checks(s, fresh):
        target = done.lease_target(s, workflow.now())
        if target is not None:
            await lease_steps.extend_lease(s, target, "done check")
        ran = await _interruptible(s, check, round_number)
        if ran is None:
            return None
        if isinstance(ran, str):
            why = f"done check {check.index + 1} could not be run: {ran}"
            if check.in_place:
                why = f"done check {check.index + 1} in place could not be run: {ran}"
            return restart_within_budget(s, why, workflow.now())
        checks.append(ran)
        publish(s)
        if not ran.passed:
            break
    if fresh and all(check.passed for check in checks):
        outcome = await done_sandbox_steps.fresh_round(s, round_number, checks, publish)
        if outcome is None:
            return None
        if isinstance(outcome, str):
            return restart_within_budget(s, outcome, workflow.now())
    failed = done.record_round(s, checks)
    if failed is not None:
        workflow.logger.info("done check failed: %s", s.done.done_pending)
    return after_done_checks(s, workflow.now())


async def _interruptible(
    s: SupervisorState, check: done.InPlace, round_number: int
) -> DoneCheck | str | None:
    """One check in the agent's sandbox, given up when the run is cancelled (None); why it
    could not be run (str)."""
    assert s.sandbox_id is not None
    return await done_sandbox_steps.interruptible(
        s,
        done_checks.run_done_check(
            s.spec,
            s.sandbox_id,
            check.index,
            round_number,
            s.attempt,
            route=host_steps.current_route(s),
            in_place=check.in_place,
        ),
    )


async def start_again(s: SupervisorState, decision: DoneRound) -> str | None:
    """Start the agent again in its sandbox with a fresh process, its restart reason naming
    the failed check (the file `DONE_CHECK_FILE` holds its output); why a restart from the
    checkpoint is needed instead when it could not be (None: it runs)."""
    assert s.sandbox_id is not None
    if (
        s.sandbox.paused_in_place or s.sandbox.sandbox_paused
    ) and not await kit_request_steps.wake_in_place(
        s, "budget extended: the agent starts again on its done check", agent_ended=True
    ):
        return "sandbox paused for its done check could not be woken"
    s.done.done_rounds += 1
    s.done.done_pending = None
    ended = s.process_id
    started = await outcomes.outcome(
        sandbox.start_agent(
            s.spec,
            s.sandbox_id,
            s.attempt,
            s.attempts.process_fresh_start,
            ended,
            done_round=s.done.done_rounds,
            done_reason=decision.reason,
            route=host_steps.current_route(s),
        )
    )
    if isinstance(started, ActivityError):
        why = outcomes.describe(started)
        return f"could not start the agent again for its done check: {why}"
    note_started_again(s, started, decision.reason, workflow.now())
    return None
