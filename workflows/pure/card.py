"""What a person sees of a run: the `status` answer and the Web UI's Markdown card. Pure."""

from __future__ import annotations

from datetime import datetime

from overnight.core.hosts import host_of_queue
from overnight.core.models import RunStatus
from overnight.core.output_tail import markdown_block, markdown_inline
from overnight.core.retry_note import note_line
from overnight.core.status_lines import done_check_block, usd
from workflows.pure import ci, delivery, kit_requests, model_books
from workflows.pure.budget import (
    charged_usd,
    estimated_spend_usd,
    hours_used,
    spend_usd,
    wait_hours_used,
)
from workflows.pure.checkpoint import kept_facts
from workflows.pure.egress import refused_totals
from workflows.pure.hosts import shown_host
from workflows.pure.safety_net import summary as safety_net_summary
from workflows.pure.stall_watch import stalls_at
from workflows.pure.state import SupervisorState
from workflows.pure.status_facts import Fact, Row, lay_out, status_facts
from workflows.pure.workspace import view as workspace_view

# The card shows this many of the last words' lines (`overnight logs` shows the rest).
CARD_TAIL_LINES = 15
# A run in one of these is over: its card is written for the last time, so it says when
# things happened rather than how long ago, and names no lease (no sandbox runs on one).
ENDED_STATES = ("finished", "cancelled", "failed")


def build_status(state: SupervisorState, now: datetime) -> RunStatus:
    sandbox = state.sandbox_id
    if sandbox is None and state.sandbox.paused_sandboxes:
        sandbox = state.sandbox.paused_sandboxes[-1]
    return RunStatus(
        run_id=state.spec.run_id,
        state=state.state,
        attempt=state.attempt,
        sandbox_id=sandbox,
        process_id=state.process_id,
        restarts_used=state.attempts.restarts_used,
        fresh_starts_used=state.attempts.fresh_starts_used,
        budget=state.budget,
        hours_used=round(hours_used(state, now), 4),
        wait_hours_used=round(wait_hours_used(state, now), 4),
        spend_usd=round(spend_usd(state, now), 4),
        spend_charged_usd=_rounded(charged_usd(state)),
        spend_estimated_usd=round(estimated_spend_usd(state, now), 4),
        daily_limit=state.money.daily_limit,
        waiting_for_daily_window=state.attention.daily_window_wait
        and state.state == "needs_attention",
        started_at=state.started_at,
        last_progress_at=state.progress.last_checkpoint_at
        if state.progress.progress_is_checkpoints
        else state.progress.last_progress_at,
        stalls_at=stalls_at(state),
        stall_seconds=state.spec.stall_seconds,
        checkpoint_bytes=len(state.progress.checkpoint.encode())
        if state.progress.checkpoint
        else 0,
        checkpoint_summary=kept_facts(
            state.progress.checkpoint, state.progress.checkpoint_facts
        ).summary,
        checkpoint_rejected=state.progress.checkpoint_rejected,
        attention_reason=state.attention.attention_reason
        if state.state == "needs_attention"
        else None,
        restarts=list(state.attempts.restarts),
        lease_ends_at=None if state.state in ENDED_STATES else state.sandbox.lease_ends_at,
        lease_resumes=state.sandbox.lease_resumes,
        isolation=state.sandbox.isolation,
        host=shown_host(state, sandbox),
        lost_hosts=[host_of_queue(q) for q in state.hosts.lost_hosts],
        sandbox_hosts={box: host_of_queue(q) for box, q in state.hosts.sandbox_hosts.items()},
        last_words=state.attempts.last_words,
        latest_snapshot=state.snapshot.snapshots[-1] if state.snapshot.snapshots else None,
        snapshots=list(state.snapshot.snapshots),
        snapshots_taken=state.snapshot.snapshots_taken,
        snapshot_failures=state.snapshot.snapshot_failures,
        snapshot_pause_seconds=round(state.snapshot.snapshot_pause_seconds, 3),
        snapshot_error=state.snapshot.snapshot_error,
        restored_from=state.snapshot.restored_from,
        spend_model_usd=round(model_books.model_spend_usd(state), 4),
        spend_model_source="gateway" if state.money.gateway_metered else "agent",
        spend_model_reported_usd=_rounded(model_books.reported_apart(state)),
        model_api=model_books.upstream_line(state, now),
        model_calls_capped=sum(b.cap_refusals for b in state.money.gateway_books.values()),
        talk=kit_requests.talk_view(state),
        outputs=delivery.shown_outputs(state),
        safety_net=safety_net_summary(state, now),
        failure=state.failure,
        cancel_reason=state.cancel_reason if state.cancel_requested else None,
        waiting_on=note_line(state.waiting_on)
        if state.waiting_on is not None
        else ci.waiting_line(state),
        done_checks_used=state.done.done_checks_used,
        done_checks=list(state.done.done_results),
        workspace=workspace_view(state),
        egress_refused=refused_totals(state),
        pushed_commit=state.delivery.pushed_commit,
        pull_request_url=state.delivery.pull_request_url,
        ci=ci.view(state),
    )


def _as_is(text: str) -> str:
    return text


def _link(url: str) -> str:
    return f"<{markdown_inline(url)}>"


# The card's lines below its title, in order: the facts each shows, under what label and how.
# Text the agent may have written (its question, outputs, why a checkpoint was kept, a
# restart's reason) is shown as written, never as a link or emphasis. Facts `overnight status`
# shows too are made in status_facts.py.
CARD_ROWS: tuple[Row, ...] = (
    ("attempt", "attempt", _as_is),
    ("next step", "next step", markdown_inline),
    ("budget", "restarts", _as_is),
    ("last progress", "last progress", _as_is),
    ("stall watch", "stall watch", _as_is),
    ("network", "network", _as_is),
    ("charged", "charged", _as_is),
    ("lease ends", "lease ends", _as_is),
    ("sandbox", "sandbox", _as_is),
    ("snapshot", "snapshot", _as_is),
    ("safety net", "safety net", _as_is),
    ("workspace", "workspace", markdown_inline),
    ("pushed", "pushed", lambda commit: f"`{commit}`, on the origin"),
    ("pull request", "pull request", _link),
    ("CI", "CI", markdown_inline),
    ("failed", "failed", markdown_inline),
    ("cancelled", "cancelled", markdown_inline),
    ("waiting on", "waiting on", markdown_inline),
    ("needs you", "needs attention", markdown_inline),
    ("talk", None, markdown_inline),
    ("checkpoint kept", "checkpoint kept", markdown_inline),
    ("last restart", "last restart", _as_is),
    ("done check", "done check", markdown_inline),
)


def _card_line(label: str, text: str) -> str:
    return f"- **{label}** {text}"


def render_card(status: RunStatus, now: datetime) -> str:
    """A short Markdown card for `workflow.set_current_details`."""
    live = status.state not in ENDED_STATES
    facts = status_facts(status, now, live=live, stamped=True) + _card_only_facts(status, live)
    lines = [f"### overnight run `{status.run_id}`: **{status.state}**", ""]
    lines += lay_out(facts, CARD_ROWS, _card_line)
    words = status.last_words
    if words is not None and words.tail:
        tail = "\n".join(words.tail.splitlines()[-CARD_TAIL_LINES:])
        lines += [
            "",
            f"**last output** of attempt {words.attempt} ({words.reason}, "
            f"{words.at:%H:%M:%S} UTC):",
            "",
            markdown_block(tail),
        ]
    checked = done_check_block(status, CARD_TAIL_LINES)
    if checked:
        lines += ["", "**done check output**:", "", markdown_block(checked)]
    return "\n".join(lines)


def _card_only_facts(status: RunStatus, live: bool) -> list[Fact]:
    """What the card shows and `overnight status` does not, or says otherwise. The attempt's
    and the budget's lines say several facts each: the first one's label is the row's."""
    budget = status.budget
    hours_left = max(0.0, budget.max_hours - status.hours_used)
    spend = usd(status.spend_usd)
    if budget.max_spend_usd is not None:
        spend += f" of {usd(budget.max_spend_usd)}"
    facts = [
        Fact(
            "attempt",
            f"{status.attempt} · **sandbox** `{status.sandbox_id or '-'}`"
            + (f" · **host** `{status.host}`" if status.host else ""),
        ),
        Fact(
            "budget",
            f"{status.restarts_used}/{budget.max_restarts} · **hours** "
            f"{status.hours_used:.2f} used, {hours_left:.2f} left · **waits** "
            f"{status.wait_hours_used:.2f} of {budget.max_wait_hours:g} h · **spend** {spend}",
        ),
    ]
    if status.lease_ends_at is not None and live:
        woken = f" (woken {status.lease_resumes}x at its end)" if status.lease_resumes else ""
        facts.append(Fact("lease ends", f"{status.lease_ends_at:%H:%M:%S} UTC{woken}"))
    if status.waiting_on:
        facts.append(Fact("waiting on", status.waiting_on))
    if status.checkpoint_rejected:
        facts.append(Fact("checkpoint kept", status.checkpoint_rejected))
    if status.restarts:
        last = status.restarts[-1]
        facts.append(
            Fact("last restart", f"attempt {last.attempt}: {markdown_inline(last.reason)}")
        )
    return facts


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
