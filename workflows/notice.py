"""What the workflow tells a run's webhooks, and what it keeps of an agent's last words.

Pure functions of the state and the time (no temporalio), like `decide`.
"""

from __future__ import annotations

from datetime import datetime

from activities.models import OutputTail
from activities.notify.models import BudgetLeft, Notification
from overnight.models import LastWords, RestartRecord
from overnight.notify_spec import NotifyEvent
from workflows.budget import hours_used, restarts_left, spend_usd
from workflows.checkpoint import kept_facts
from workflows.state import SupervisorState

# Restart records keep their output tails only for the newest this many (history stays small).
TAILS_KEPT = 10


def note_last_words(
    s: SupervisorState, tail: OutputTail | None, reason: str, now: datetime
) -> None:
    """Keep the last words of the agent that just ended (the current process)."""
    if tail is None:
        return
    s.last_words = LastWords(
        attempt=s.attempt,
        fresh_start=s.process_fresh_start,
        reason=reason,
        at=now,
        tail=tail.text,
        truncated=tail.truncated,
    )


def record_restart(s: SupervisorState, record: RestartRecord) -> None:
    """Give a restart record its attempt's last words (if read), keeping tails bounded."""
    words = s.last_words
    if words is not None and words.attempt == record.attempt:
        record.output_tail = words.tail
    for old in s.restarts[:-TAILS_KEPT]:
        old.output_tail = None


def notification(
    s: SupervisorState, event: NotifyEvent, reason: str, now: datetime
) -> Notification:
    """The `n`-th notification of the run (`s.notifications_sent` already counts it)."""
    budget = s.budget
    spent = spend_usd(s, now)
    used = hours_used(s, now)
    summary = kept_facts(s.checkpoint, s.checkpoint_facts).summary
    words = s.last_words
    return Notification(
        event_id=f"{s.spec.run_id}-{s.notifications_sent}",
        event=event,
        run_id=s.spec.run_id,
        state=s.state,
        reason=_with_outputs(reason, s) if event == "finished" else reason,
        at=now,
        attempt=s.attempt,
        restarts_used=s.restarts_used,
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
        outputs=s.outputs if event == "finished" else None,
        webhooks=list(s.spec.notify),
        secret_env=list(s.spec.secret_env),
    )


def _with_outputs(reason: str, s: SupervisorState) -> str:
    """A finish notification says what the agent handed over (its summary, its outputs)."""
    outputs = s.outputs
    if outputs is None:
        return reason
    said = [outputs.summary] if outputs.summary else []
    said += [f"{name}: {value}" for name, value in outputs.values.items()]
    return "; ".join([reason, *said])


def attention_text(reason: str, pending_restart: str | None) -> str:
    """Why the run needs a person: what happened (a crash...) and what ran out."""
    if pending_restart and pending_restart != reason:
        return f"{pending_restart}; {reason}"
    return reason
