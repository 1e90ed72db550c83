"""What a run records of what it sees: a checkpoint taken, a sandbox started, an agent's last
words, a restart, the result.

Pure functions on `SupervisorState` (no temporalio): the workflow calls them with
`workflow.now()` and does the logging.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from activities.models import AgentStarted, CheckpointRead, OutputTail, RequestsRead
from overnight.core.checkpoint_text import parsed_for_result
from overnight.core.models import LastWords, RestartRecord, RunResult
from workflows.pure import budget, ci, delivery, kit_requests, model_books, money, safety_net
from workflows.pure.checkpoint import facts, judge, kept_facts
from workflows.pure.egress import refused_totals
from workflows.pure.state import SupervisorState

# Restart records keep their output tails only for the newest this many (history stays small).
TAILS_KEPT = 10


def note_last_words(
    s: SupervisorState, tail: OutputTail | None, reason: str, now: datetime
) -> None:
    """Keep the last words of the agent that just ended (the current process)."""
    if tail is None:
        return
    s.attempts.last_words = LastWords(
        attempt=s.attempt,
        fresh_start=s.attempts.process_fresh_start,
        reason=reason,
        at=now,
        tail=tail.text,
        truncated=tail.truncated,
    )


def note_started_again(
    s: SupervisorState, started: AgentStarted, reason: str, now: datetime
) -> None:
    """The agent runs again in its sandbox after it finished (exit 0) and a check said no
    (`reason`: a done check's or a CI check's round): the ended process's last words kept,
    the new process followed, its progress counted from now."""
    note_last_words(s, started.previous_output, f"finished (exit 0), then {reason}", now)
    s.process_id = started.process_id
    s.progress.last_progress_at = now
    s.state = "running"


def record_restart(s: SupervisorState, record: RestartRecord) -> None:
    """Give a restart record its attempt's last words (if read), keeping tails bounded."""
    words = s.attempts.last_words
    if words is not None and words.attempt == record.attempt:
        record.output_tail = words.tail
    for old in s.attempts.restarts[:-TAILS_KEPT]:
        old.output_tail = None


def take_checkpoint(
    s: SupervisorState,
    read: CheckpointRead | None,
    now: datetime,
    *,
    by_progress_mark: Callable[[], bool] | None = None,
) -> tuple[bool, str | None]:
    """Take a newly read checkpoint if it may replace the last good one. Returns whether it
    was taken, and why not when it was refused (None: nothing new to judge).

    A taken checkpoint is progress (`last_progress_at`), unless it and the last one carry the
    same `progress_mark` value and `by_progress_mark()` says that rule holds for the run (the
    caller's patch marker): then it says only what the agent is doing (its notes, `next`), not
    new work, and the stall clock runs on."""
    if read is None or read.status == "unchanged":
        return False, None
    if read.digest is not None:
        s.progress.seen_digest = read.digest
    verdict = judge(
        read, previous_was_json=s.progress.checkpoint_is_json, max_bytes=s.spec.max_checkpoint_bytes
    )
    if not verdict.accepted:
        if verdict.reason:
            s.progress.checkpoint_rejected = verdict.reason
        return False, verdict.reason
    said = facts(read)
    before = kept_facts(s.progress.checkpoint, s.progress.checkpoint_facts).progress_mark
    same_work = said.progress_mark is not None and said.progress_mark == before
    s.progress.checkpoint = read.text
    s.progress.checkpoint_digest = read.digest
    s.progress.checkpoint_is_json = verdict.is_json
    s.progress.checkpoint_facts = said
    s.progress.checkpoint_rejected = None
    if not (same_work and by_progress_mark is not None and by_progress_mark()):
        s.progress.last_progress_at = now
        s.progress.last_checkpoint_at = now
    kit_requests.take_requests(s)
    return True, None


def take_requests_file(s: SupervisorState, read: RequestsRead | None) -> bool:
    """Take a newly read requests file (runs that read it). One refused whole (too large, not
    JSON) leaves what the last good one asked, and says why. Returns whether it was news."""
    if not s.kit.requests_file or read is None or read.status == "unchanged":
        return False
    s.kit.requests_digest = read.digest
    if read.status in ("ok", "missing"):
        s.kit.file_requests = read.requests
    kit_requests.take_requests(s)
    if read.refused is not None:
        s.kit.request_refused = read.refused
    return True


def sandbox_started(s: SupervisorState, started: AgentStarted, now: datetime) -> None:
    """A new sandbox runs the agent: the run's state follows it."""
    safety_net.restarted(s, now)
    s.sandbox_id = started.sandbox_id
    s.process_id = started.process_id
    s.attempts.process_fresh_start = 0
    s.sandbox.sandbox_started_at = now
    s.money.sandbox_spent_before_usd = 0
    if started.daily is not None:
        money.take_daily(s, started.daily, now)
    s.progress.last_progress_at = now
    s.sandbox.lease_ends_at = started.lease_ends_at
    s.sandbox.lease_extended_at = now
    s.sandbox.watch_token = None
    s.sandbox.sandbox_paused = False
    s.sandbox.isolation = started.isolation
    s.snapshot.restored_from = started.restored_from
    # The new sandbox holds the last good checkpoint: that is not news.
    s.progress.seen_digest = s.progress.checkpoint_digest
    # Its requests file is its own agent's (the last sandbox's asked for the last agent).
    s.kit.file_requests = None
    s.kit.requests_digest = None
    # A failed keep held the sandbox set aside, not this one (it starts from the last kept).
    s.workspace.keep_waits = None
    s.state = "running"


def run_result(s: SupervisorState, now: datetime) -> RunResult:
    return RunResult(
        run_id=s.spec.run_id,
        outcome="finished" if s.state == "finished" else "cancelled",
        checkpoint=s.progress.checkpoint,
        attempts=s.attempt,
        restarts=s.attempts.restarts_used,
        hours_used=round(budget.hours_used(s, now), 4),
        spend_usd=round(budget.spend_usd(s, now), 4),
        outputs=delivery.shown_outputs(s),
        spend_model_usd=round(model_books.model_spend_usd(s), 4),
        spend_model_source="gateway" if s.money.gateway_metered else "agent",
        safety_net=safety_net.summary(s, now),
        checkpoint_json=parsed_for_result(s.progress.checkpoint, s.progress.checkpoint_is_json),
        done_checks=list(s.done.done_results),
        done_checks_used=s.done.done_checks_used,
        egress_refused=refused_totals(s),
        pushed_commit=s.delivery.pushed_commit,
        pull_request_url=s.delivery.pull_request_url,
        ci=ci.view(s),
    )
