"""What the workflow tells a run's webhooks: the payload of one state change, and the text
a person reads when a run needs attention. Pure functions of the state and the time."""

from __future__ import annotations

from datetime import datetime

from activities.notify.models import BudgetLeft, Notification
from overnight.core.notify_spec import NotifyEvent
from workflows.pure.budget import hours_used, restarts_left, spend_usd
from workflows.pure.checkpoint import kept_facts
from workflows.pure.delivery import shown_outputs
from workflows.pure.state import SupervisorState


def notification(
    s: SupervisorState, event: NotifyEvent, reason: str, now: datetime
) -> Notification:
    """The `n`-th notification of the run (`s.notifications_sent` already counts it)."""
    budget = s.budget
    spent = spend_usd(s, now)
    used = hours_used(s, now)
    summary = kept_facts(s.progress.checkpoint, s.progress.checkpoint_facts).summary
    words = s.attempts.last_words
    return Notification(
        event_id=f"{s.spec.run_id}-{s.notifications_sent}",
        event=event,
        run_id=s.spec.run_id,
        state=s.state,
        reason=_with_outputs(reason, s) if event == "finished" else reason,
        at=now,
        attempt=s.attempt,
        restarts_used=s.attempts.restarts_used,
        budget=budget,
        budget_left=BudgetLeft(
            restarts=restarts_left(s),
            hours=round(max(0.0, budget.max_hours - used), 4),
            spend_usd=None
            if budget.max_spend_usd is None
            else round(max(0.0, budget.max_spend_usd - spent), 4),
        ),
        hours_used=round(used, 4),
        spend_usd=round(spent, 4),
        next_step=summary.next if summary is not None else None,
        output_tail=words.tail if words is not None else None,
        output_attempt=words.attempt if words is not None else None,
        outputs=shown_outputs(s) if event == "finished" else None,
        pushed_commit=s.delivery.pushed_commit if event == "finished" else None,
        pull_request_url=s.delivery.pull_request_url if event == "finished" else None,
        webhooks=list(s.spec.notify),
        secret_env=list(s.spec.secret_env),
    )


def _with_outputs(reason: str, s: SupervisorState) -> str:
    """A finish notification says what the agent handed over (its summary, its outputs) and
    its pull request."""
    outputs = shown_outputs(s)
    said = [outputs.summary] if outputs is not None and outputs.summary else []
    if outputs is not None:
        said += [f"{name}: {value}" for name, value in outputs.values.items()]
    if s.delivery.pull_request_url:
        said.append(f"pull request: {s.delivery.pull_request_url}")
    return "; ".join([reason, *said])


def attention_text(reason: str, pending_restart: str | None) -> str:
    """Why the run needs a person: what happened (a crash...) and what ran out."""
    if pending_restart and pending_restart != reason:
        return f"{pending_restart}; {reason}"
    return reason
