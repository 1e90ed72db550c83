"""AgentRun's `done_when` round in a sandbox of its own: the agent's work pushed and confirmed
on the origin, a fresh sandbox with a clean clone at that commit
(activities/delivery/done_sandbox.py), the checks run there one by one, and that sandbox stopped,
whichever way the round ends.

Workflow code (the activities through `calls`); the decisions are in `workflows.pure.done`.
Behind `DONE_CHECKS_FRESH_PATCH` (workflows/done_steps.py asks it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.models.done_sandbox import DoneCheckSandbox
    from overnight.core.done_check import DoneCheck
    from workflows import end_steps, host_steps, workspace_steps
    from workflows.calls import done_checks, outcomes, sandbox_lifecycle
    from workflows.pure import budget, done, money, workspace
    from workflows.pure.state import SupervisorState

Publish = Callable[[SupervisorState], None]
T = TypeVar("T")

# What `fresh_round` answers besides True (ran: the checks are in the list): None when the run
# was cancelled meanwhile, a string saying why the round could not be run.
Ran = bool | str | None


async def fresh_round(
    s: SupervisorState, round_number: int, checks: list[DoneCheck], publish: Publish
) -> Ran:
    """Run `done_when` against the pushed work in a new check sandbox, appending each check to
    `checks` (a failed one ends the round); the check sandbox is stopped on every way out."""
    assert s.sandbox_id is not None
    s.done.check_sandboxes_made += 1
    number = s.done.check_sandboxes_made
    now = workflow.now()
    prepared = await interruptible(
        s,
        done_checks.prepare_done_check(
            s.spec,
            s.sandbox_id,
            number,
            round_number,
            at=now,
            previous=_previous_commit(s),
            max_total_cost_micros=budget.spend_left_micros(s, now)
            if s.sandbox.lease_keeping
            else None,
            lease_cost_micros=money.next_lease_micros(s) if money.keeps_account(s) else None,
            route=host_steps.current_route(s),
        ),
        wait_cancelled=True,
    )
    if not isinstance(prepared, DoneCheckSandbox):
        # Cancelled, or could not be made: a sandbox half made is found by its label.
        await end_steps.sweep(s, stop=True, paused_too=False, why="done check sandbox not made")
        if prepared is None:
            return None
        return f"done check sandbox {number} could not be made ready: {prepared}"
    if prepared.commit is not None:
        s.done.done_commit = prepared.commit
        workspace_steps.note_refs_pushed(s)
    if prepared.sandbox_id is None:
        checks.append(done.unchecked(s, round_number, prepared.problem, workflow.now()))
        return True
    s.done.check_sandbox_id = prepared.sandbox_id
    made_at = workflow.now()
    try:
        return await _checks(s, prepared, round_number, checks, publish)
    finally:
        await _close(s, prepared.sandbox_id, made_at)


async def _checks(
    s: SupervisorState,
    prepared: DoneCheckSandbox,
    round_number: int,
    checks: list[DoneCheck],
    publish: Publish,
) -> Ran:
    assert s.sandbox_id is not None and prepared.sandbox_id is not None
    lease_ends_at = prepared.lease_ends_at
    for index in range(len(s.spec.done_when)):
        target = done.check_lease_target(
            lease_ends_at, s.spec.done_check_timeout_seconds, workflow.now()
        )
        if target is not None:
            lease_ends_at = await _extend(s, prepared.sandbox_id, target) or lease_ends_at
        ran = await interruptible(
            s,
            done_checks.run_done_check(
                s.spec,
                prepared.sandbox_id,
                index,
                round_number,
                s.attempt,
                route=host_steps.current_route(s),
                agent_sandbox_id=s.sandbox_id,
                commit=prepared.commit,
            ),
        )
        if ran is None:
            return None
        if isinstance(ran, str):
            return f"done check {index + 1} could not be run: {ran}"
        checks.append(ran)
        publish(s)
        if not ran.passed:
            break
    return True


async def _extend(s: SupervisorState, sandbox_id: str, until: datetime) -> datetime | None:
    """The check sandbox's lease moved so the next check fits (None: not moved; the check
    then meets the lease end, and fails, saying so)."""
    rate = budget.micros_per_second(s.spec) if money.keeps_account(s) else None
    info = await sandbox_lifecycle.extend_sandbox(
        s.spec,
        sandbox_id,
        until,
        "done check",
        micros_per_second=rate,
        route=host_steps.current_route(s),
    )
    if info is None or isinstance(info, sandbox_lifecycle.DailyLimitRefused):
        return None
    return info.lease_ends_at


async def _close(s: SupervisorState, sandbox_id: str, made_at: datetime) -> None:
    """Stop the check sandbox (best effort: the run's end sweeps what is left, and its lease
    stops it anyway) and count its life in the run's spend."""
    await sandbox_lifecycle.pause_or_stop(
        s.spec,
        sandbox_id,
        stop=True,
        why="done check round over",
        route=host_steps.current_route(s),
    )
    s.done.check_sandbox_id = None
    done.close_check_spend(s, (workflow.now() - made_at).total_seconds())


def _previous_commit(s: SupervisorState) -> str | None:
    """The run's latest commit on the origin, whose objects a push need not send again."""
    return s.done.done_commit or workspace.previous_commit(s)


async def interruptible(
    s: SupervisorState, call: Awaitable[T], *, wait_cancelled: bool = False
) -> T | str | None:
    """`call`'s result, given up when the run is cancelled (None); why it failed (str).
    `wait_cancelled`: a call given up is waited for until it has really stopped (one that
    makes a sandbox: the sweep after it must see what it made)."""
    task = asyncio.ensure_future(call)
    given_up = False
    try:
        await workflow.wait_condition(lambda: task.done() or s.cancel_requested)
    finally:
        # A `cancel` signal, or a Temporal cancellation of the run: the call is not waited for
        # (but for its cancellation, when asked).
        if not task.done():
            task.cancel()
            given_up = True
            if wait_cancelled:
                with contextlib.suppress(ActivityError, asyncio.CancelledError):
                    await task
    if given_up:
        return None
    try:
        return task.result()
    except ActivityError as err:
        outcomes.reraise_cancellation(err)
        return outcomes.describe(err)
