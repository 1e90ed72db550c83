"""AgentRun waiting for a person: out of budget (or held by the key's daily spending limit),
its sandbox paused, until `extend_budget`, `cancel`, the daily window reopening, or
`attention_hours` passing.

Workflow code (timers and activities through `calls`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import NoReturn

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows import admission_steps, end_steps, money_steps
    from workflows.messages import RunMessages
    from workflows.notify_steps import Notifier
    from workflows.pure import money
    from workflows.pure.decide import Decision, NeedsAttention, decide_resume
    from workflows.pure.state import SupervisorState


class Unanswered:
    """Nobody came within `attention_hours`: the run gives up."""


async def wait_for_person(
    s: SupervisorState, messages: RunMessages
) -> Decision | Unanswered | None:
    assert s.attention.attention_since is not None
    deadline = s.attention.attention_since + timedelta(hours=s.spec.attention_hours)
    left = deadline - workflow.now()
    wait, summary = left, "waiting for a person: extend_budget or cancel"
    if s.attention.daily_window_wait:
        wait = min(left, money.DAILY_WINDOW_RECHECK)
        summary = "waiting for the key's daily spending window (or extend_budget, cancel)"
    try:
        await workflow.wait_condition(
            lambda: messages.budget_changed or s.cancel_requested,
            timeout=max(wait, timedelta(seconds=1)),
            timeout_summary=summary,
        )
    except TimeoutError:
        if s.attention.daily_window_wait and workflow.now() < deadline:
            if not await money_steps.daily_window_open(s):
                return None
            messages.budget_changed = True  # room again: resume as after an extension
        if not messages.budget_changed:
            return Unanswered()
    if s.cancel_requested:
        return None
    messages.budget_changed = False
    decision = decide_resume(s, workflow.now())
    if isinstance(decision, NeedsAttention):
        s.attention.attention_reason = decision.reason
        s.attention.daily_window_wait = False
        return None
    s.attention.attention_seconds += (workflow.now() - s.attention.attention_since).total_seconds()
    s.attention.attention_since = None
    s.attention.attention_reason = None
    s.attention.daily_window_wait = False
    s.attempts.pending_counted = False
    s.state = "restarting"
    return decision


async def give_up(s: SupervisorState, notifier: Notifier) -> NoReturn:
    """Nobody came within `attention_hours`: the run fails (its sandboxes stay paused)."""
    why = (
        f"run {s.spec.run_id} is out of budget ({s.attention.attention_reason}) and nobody "
        f"extended it within {s.spec.attention_hours:g} h"
    )
    if s.kit.question is not None:
        why = (
            f"run {s.spec.run_id}: nobody answered its agent's question within "
            f"{2 * s.spec.attention_hours:g} h ({s.kit.question.question[:200]})"
        )
    notifier.tell(s, "failed", why)
    await notifier.settle()
    await end_steps.free_stores(s, why="run failed: out of budget")
    await admission_steps.give_back(s)
    raise ApplicationError(why, type="OutOfBudget", non_retryable=True)
