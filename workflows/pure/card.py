"""What a person sees of a run: the `status` answer and the Web UI's Markdown card. Pure."""

from __future__ import annotations

from datetime import datetime

from overnight.ci_rounds import ci_line
from overnight.egress import refusal_words
from overnight.hosts import host_of_queue
from overnight.models import RunStatus
from overnight.output_tail import markdown_block, markdown_inline
from overnight.retry_note import note_line
from overnight.status_lines import (
    done_check_block,
    done_check_line,
    moment,
    money_line,
    needs_you_line,
    safety_net_line,
    snapshot_line,
    talk_lines,
    usd,
)
from overnight.workspace_spec import workspace_line
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
from workflows.pure.stall_watch import stall_coming, stalls_at
from workflows.pure.state import SupervisorState
from workflows.pure.workspace import view as workspace_view

# The card shows this many of the last words' lines (`overnight logs` shows the rest).
CARD_TAIL_LINES = 15
# A run in one of these is over: its card is written for the last time, so it says when
# things happened rather than how long ago, and names no lease (no sandbox runs on one).
ENDED_STATES = ("finished", "cancelled", "failed")


def build_status(state: SupervisorState, now: datetime) -> RunStatus:
    sandbox = state.sandbox_id
    if sandbox is None and state.paused_sandboxes:
        sandbox = state.paused_sandboxes[-1]
    return RunStatus(
        run_id=state.spec.run_id,
        state=state.state,
        attempt=state.attempt,
        sandbox_id=sandbox,
        process_id=state.process_id,
        restarts_used=state.restarts_used,
        fresh_starts_used=state.fresh_starts_used,
        budget=state.budget,
        hours_used=round(hours_used(state, now), 4),
        wait_hours_used=round(wait_hours_used(state, now), 4),
        spend_usd=round(spend_usd(state, now), 4),
        spend_charged_usd=_rounded(charged_usd(state)),
        spend_estimated_usd=round(estimated_spend_usd(state, now), 4),
        daily_limit=state.daily_limit,
        waiting_for_daily_window=state.daily_window_wait and state.state == "needs_attention",
        started_at=state.started_at,
        last_progress_at=state.last_checkpoint_at
        if state.progress_is_checkpoints
        else state.last_progress_at,
        stalls_at=stalls_at(state),
        stall_seconds=state.spec.stall_seconds,
        checkpoint_bytes=len(state.checkpoint.encode()) if state.checkpoint else 0,
        checkpoint_summary=kept_facts(state.checkpoint, state.checkpoint_facts).summary,
        checkpoint_rejected=state.checkpoint_rejected,
        attention_reason=state.attention_reason if state.state == "needs_attention" else None,
        restarts=list(state.restarts),
        lease_ends_at=None if state.state in ENDED_STATES else state.lease_ends_at,
        lease_resumes=state.lease_resumes,
        isolation=state.isolation,
        host=shown_host(state, sandbox),
        lost_hosts=[host_of_queue(q) for q in state.lost_hosts],
        sandbox_hosts={box: host_of_queue(q) for box, q in state.sandbox_hosts.items()},
        last_words=state.last_words,
        latest_snapshot=state.snapshots[-1] if state.snapshots else None,
        snapshots=list(state.snapshots),
        snapshots_taken=state.snapshots_taken,
        snapshot_failures=state.snapshot_failures,
        snapshot_pause_seconds=round(state.snapshot_pause_seconds, 3),
        snapshot_error=state.snapshot_error,
        restored_from=state.restored_from,
        spend_model_usd=round(model_books.model_spend_usd(state), 4),
        spend_model_source="gateway" if state.gateway_metered else "agent",
        spend_model_reported_usd=_rounded(model_books.reported_apart(state)),
        model_api=model_books.upstream_line(state, now),
        model_calls_capped=sum(b.cap_refusals for b in state.gateway_books.values()),
        talk=kit_requests.talk_view(state),
        outputs=delivery.shown_outputs(state),
        safety_net=safety_net_summary(state, now),
        failure=state.failure,
        cancel_reason=state.cancel_reason if state.cancel_requested else None,
        waiting_on=note_line(state.waiting_on)
        if state.waiting_on is not None
        else ci.waiting_line(state),
        done_checks_used=state.done_checks_used,
        done_checks=list(state.done_results),
        workspace=workspace_view(state),
        egress_refused=refused_totals(state),
        pushed_commit=state.pushed_commit,
        pull_request_url=state.pull_request_url,
        ci=ci.view(state),
    )


def render_card(status: RunStatus, now: datetime) -> str:
    """A short Markdown card for `workflow.set_current_details`."""
    live = status.state not in ENDED_STATES
    budget = status.budget
    hours_left = max(0.0, budget.max_hours - status.hours_used)
    restarts = f"{status.restarts_used}/{budget.max_restarts}"
    spend = usd(status.spend_usd)
    if budget.max_spend_usd is not None:
        spend += f" of {usd(budget.max_spend_usd)}"
    lines = [
        f"### overnight run `{status.run_id}`: **{status.state}**",
        "",
        f"- **attempt** {status.attempt} · **sandbox** `{status.sandbox_id or '-'}`"
        + (f" · **host** `{status.host}`" if status.host else ""),
        f"- **next step** {_next_step(status)}",
        f"- **restarts** {restarts} · **hours** {status.hours_used:.2f} used, "
        f"{hours_left:.2f} left · **waits** {status.wait_hours_used:.2f} of "
        f"{budget.max_wait_hours:g} h · **spend** {spend}",
        f"- **last progress** {moment(status.last_progress_at, now, live=live)}",
    ]
    coming = stall_coming(status, now)
    if coming and status.stalls_at is not None:
        # Written at a wake and read later: the moment too, which stays true.
        lines.append(f"- **stall watch** {coming} ({status.stalls_at:%H:%M:%S} UTC)")
    blocked = refusal_words(status.egress_refused)
    if blocked is not None:
        lines.append(f"- **network** {blocked}")
    money = money_line(status)
    if money:
        lines.append(f"- **charged** {money}")
    if status.lease_ends_at is not None and live:
        woken = f" (woken {status.lease_resumes}x at its end)" if status.lease_resumes else ""
        lines.append(f"- **lease ends** {status.lease_ends_at:%H:%M:%S} UTC{woken}")
    if status.isolation:
        lines.append(f"- **sandbox** {status.isolation}")
    snapshot = snapshot_line(status, now, live=live)
    if snapshot:
        lines.append(f"- **snapshot** {snapshot}")
    net = safety_net_line(status.safety_net)
    if net:
        lines.append(f"- **safety net** {net}")
    kept = workspace_line(status.workspace)
    if kept:
        lines.append(f"- **workspace** {markdown_inline(kept)}")
    if status.pushed_commit:
        lines.append(f"- **pushed** `{status.pushed_commit[:12]}`, on the origin")
    if status.pull_request_url:
        lines.append(f"- **pull request** <{markdown_inline(status.pull_request_url)}>")
    checks = ci_line(status.ci)
    if checks:
        lines.append(f"- **CI** {markdown_inline(checks)}")
    # Below, text the agent may have written (its question, outputs, why a checkpoint was
    # kept, a restart's reason) is shown as written, never as a link or emphasis.
    if status.failure:
        lines.append(f"- **failed** {markdown_inline(status.failure)}")
    if status.cancel_reason:
        lines.append(f"- **cancelled** {markdown_inline(status.cancel_reason)}")
    if status.waiting_on:
        lines.append(f"- **waiting on** {markdown_inline(status.waiting_on)}")
    needs_you = needs_you_line(status)
    if needs_you:
        lines.append(f"- **needs attention** {markdown_inline(needs_you)}")
    lines += [
        f"- **{markdown_inline(label)}** {markdown_inline(text)}"
        for label, text in talk_lines(status)
    ]
    if status.checkpoint_rejected:
        lines.append(f"- **checkpoint kept** {markdown_inline(status.checkpoint_rejected)}")
    if status.restarts:
        last = status.restarts[-1]
        lines.append(f"- **last restart** attempt {last.attempt}: {markdown_inline(last.reason)}")
    done = done_check_line(status)
    if done:
        lines.append(f"- **done check** {markdown_inline(done)}")
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


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _next_step(status: RunStatus) -> str:
    summary = status.checkpoint_summary
    if summary is None or summary.next is None:
        return "-"
    return markdown_inline(summary.next)
