"""What the supervisor does next: a pure function of the run state, an observation and the time.

No temporalio, no providers, no I/O: the workflow only carries out what this returns, which is
what makes every failure row of the design testable in microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from activities.models import Observation
from overnight.core.agent_spec import LOOP_EXIT_CODE, LOOP_REASON
from overnight.core.constants import DISK_LIMIT_PREFIX, HOST_FLOOR_PREFIX
from workflows.pure import (
    ci,
    delivery,
    done,
    hopeless,
    kit_requests,
    lease,
    model_books,
    snapshot,
    stall_watch,
    workspace,
)
from workflows.pure.budget import (
    budget_deadline,
    exhausted_reason,
    hours_used,
    restarts_left,
    wait_exhausted_reason,
    wait_room_hours,
)
from workflows.pure.checkpoint import kept_facts
from workflows.pure.state import SupervisorState

# A quiet, healthy agent still gets the workflow to wake this often, to refresh the Web UI card.
QUIET_WAKE = timedelta(minutes=10)


@dataclass(frozen=True)
class Watch:
    """Keep watching the agent until `until` unless something happens sooner."""

    until: datetime


@dataclass(frozen=True)
class Restart:
    """New sandbox from the last checkpoint; the old one is paused for a look."""

    reason: str
    counted: bool = True


@dataclass(frozen=True)
class FreshStart:
    """Start the agent again in the same sandbox with a fresh context."""


@dataclass(frozen=True)
class Finish:
    """The agent is done: copy the final checkpoint and stop the sandbox."""


@dataclass(frozen=True)
class NeedsAttention:
    """Out of budget: pause, and wait for a person. `pending_restart` is done on resume.
    `in_place`: the agent runs on; its sandbox is paused where it stands and woken on resume."""

    reason: str
    pending_restart: str | None = None
    in_place: bool = False


@dataclass(frozen=True)
class ExtendLease:
    """The agent progresses and its lease ends soon: move the lease end to `until`."""

    until: datetime


@dataclass(frozen=True)
class WakeAfterLease:
    """The sandbox paused at its lease end while the agent was progressing: wake it (a fresh
    lease) and carry on watching the same agent. `paused_at`: when it stopped running."""

    paused_at: datetime


TakeSnapshot = snapshot.TakeSnapshot
FailRun = hopeless.FailRun
WakeInPlace = kit_requests.WakeInPlace
AskPerson = kit_requests.AskPerson
PauseUntil = kit_requests.PauseUntil
DeliverAnswer = kit_requests.DeliverAnswer
DoneRound = done.DoneRound
DeliverAgain = delivery.DeliverAgain
CiRound = ci.CiRound
KeepAgain = workspace.KeepAgain
Decision = (
    Watch
    | AskPerson
    | PauseUntil
    | DeliverAnswer
    | WakeInPlace
    | Restart
    | FreshStart
    | Finish
    | NeedsAttention
    | ExtendLease
    | WakeAfterLease
    | TakeSnapshot
    | FailRun
    | DoneRound
    | DeliverAgain
    | CiRound
    | KeepAgain
)


@dataclass(frozen=True)
class ObserveFailed:
    """The observe activity ran out of retries: the sandbox stopped answering."""

    error: str


@dataclass(frozen=True)
class HostLost:
    """The current sandbox's host was taken as lost (workflows.pure.hosts): `reason` says why."""

    reason: str


Look = Observation | ObserveFailed | HostLost

# How a stall's restart reason begins (`decide` words it).
STALL_REASON = "agent stalled "


def decide(state: SupervisorState, seen: Look, now: datetime) -> Decision:
    """Turn one look at the agent into the next step."""
    if isinstance(seen, ObserveFailed):
        return restart_within_budget(state, f"sandbox stopped answering ({seen.error})", now)
    if isinstance(seen, HostLost):
        # Its agent may live on there, unwatched: counted as a failed sandbox, and stopped by
        # its host's worker when that comes back (overnight.worker.moved_away).
        return restart_within_budget(state, seen.reason, now)
    spec = state.spec

    if seen.process_state == "exited" and seen.exit_code == 0:
        return Finish()
    if seen.sandbox_state in ("stopped", "missing"):
        return restart_within_budget(state, _sandbox_gone_reason(seen), now)
    if seen.sandbox_state == "paused":
        if seen.pause_reason is not None and seen.pause_reason.startswith(DISK_LIMIT_PREFIX):
            # A new sandbox would fill the same way: a person decides (an extension restarts
            # from the checkpoint; the full sandbox is kept for a look).
            return NeedsAttention(seen.pause_reason, pending_restart=seen.pause_reason)
        if _below_host_floor(state, seen.pause_reason):
            # Not the agent's doing, and nothing lost: held where it stands until a person
            # makes room and extends (a wake still below the floor is paused again).
            return NeedsAttention(seen.pause_reason or "", in_place=True)
        if lease.lease_ended(state, seen.lease_ends_at, now):
            return _after_lease_end(state, seen, now)
        return restart_within_budget(state, "sandbox was paused from outside", now)
    if seen.process_state == "exited" and seen.exit_code == spec.fresh_context_exit_code:
        if state.attempts.fresh_starts_used < spec.max_fresh_starts:
            out_of_budget = exhausted_reason(state, now)
            return FreshStart() if out_of_budget is None else NeedsAttention(out_of_budget)
        return restart_within_budget(
            state, f"fresh-context starts used up ({spec.max_fresh_starts})", now
        )
    loop_exit = seen.exit_code == LOOP_EXIT_CODE and state.attempts.loop_exit
    if seen.process_state == "exited" and loop_exit:
        return restart_within_budget(state, loop_reason(state), now)
    if seen.process_state == "exited":
        hopeless_exit = hopeless.after_exit(state, seen.exit_code)
        if hopeless_exit is not None:
            return hopeless_exit
        return restart_within_budget(state, f"agent crashed (exit {seen.exit_code})", now)
    if seen.process_state == "killed":
        return restart_within_budget(state, "agent was killed", now)
    if seen.process_state == "missing":
        return restart_within_budget(state, "agent process is gone", now)

    if workspace.held(state):
        # A keep could not be pushed: the work since the last one is only in this sandbox,
        # so it is held here, paused, rather than going on to lose it in a crash.
        return NeedsAttention(workspace.held_reason(state), in_place=True)
    looped = model_books.loop_seen(state)
    if looped is not None:
        return restart_within_budget(state, looped, now)
    hours_left = state.budget.max_hours - hours_used(state, now)
    asked = kit_requests.request_due(state, now, wait_room_hours(state, now))
    if isinstance(asked, kit_requests.WaitOverBudget):
        return NeedsAttention(wait_exhausted_reason(state, now), in_place=True)
    if asked is not None:
        return asked
    stall_deadline = stall_deadline_of(state)
    if stall_deadline is not None and now >= stall_deadline:
        return restart_within_budget(state, _stall_reason(state), now)
    out_of_budget = exhausted_reason(state, now)
    if out_of_budget is not None:
        # Spend ran out under a running agent: it is paused where it stands (an extension
        # wakes it, nothing redone). Hours running out sets it aside as before.
        in_place = state.kit.agent_requests and hours_left > 0
        return NeedsAttention(out_of_budget, in_place=in_place)
    target = lease.extension_target(state, now)
    if target is not None:
        return ExtendLease(until=target)
    capture = snapshot.capture_due(state, now)
    if capture is not None:
        return capture
    return Watch(until=next_wake(state, now))


def _below_host_floor(state: SupervisorState, pause_reason: str | None) -> bool:
    reason = pause_reason or ""
    return state.sandbox.host_floor_kept and reason.startswith(HOST_FLOOR_PREFIX)


def _after_lease_end(state: SupervisorState, seen: Observation, now: datetime) -> Decision:
    """Paused by its lease end: nothing is lost. Carry on with the same agent unless it had
    stalled before the lease ended (then its checkpoint goes to a new sandbox) or the budget
    is spent (then a person decides)."""
    paused_at = lease.frozen_since(state, seen.lease_ends_at, now)
    out_of_budget = exhausted_reason(state, now)
    if out_of_budget is not None:
        return NeedsAttention(out_of_budget)
    stall = stall_deadline_of(state)
    if stall is not None and paused_at >= stall:
        return restart_within_budget(state, _stall_reason(state), now)
    return WakeAfterLease(paused_at=paused_at)


def decide_resume(state: SupervisorState, now: datetime) -> Decision:
    """After a budget extension (or the daily spending window reopening): go on from the
    checkpoint, or keep waiting if still short."""
    if state.attention.daily_window_wait:
        return _resume_after_daily_limit(state, now)
    if delivery.waiting(state):
        # The agent finished; its push or pull request waits: tried again, whatever the budget.
        return DeliverAgain()
    if workspace.held(state):
        # Its keep failed; a person extended it (or asked `overnight push`): keep again.
        return KeepAgain()
    if done.waiting_for_person(state):
        return after_done_checks(state, now)
    if state.sandbox.paused_in_place and state.sandbox_id is not None:
        out_of_budget = exhausted_reason(state, now)
        if out_of_budget is not None:
            return NeedsAttention(out_of_budget, in_place=True)
        asked = kit_requests.request_due(state, now, wait_room_hours(state, now))
        if isinstance(asked, kit_requests.WaitOverBudget):
            return NeedsAttention(wait_exhausted_reason(state, now), in_place=True)
        return WakeInPlace()
    reason = state.attempts.pending_restart
    if reason is not None and state.attempts.pending_counted:
        # Counted once already: an extension of any kind tries its create again.
        out_of_budget = exhausted_reason(state, now)
        if out_of_budget is not None:
            return NeedsAttention(out_of_budget, pending_restart=reason)
        return Restart(reason, counted=False)
    if reason is not None:
        return restart_within_budget(state, reason, now)
    out_of_budget = exhausted_reason(state, now)
    if out_of_budget is not None:
        return NeedsAttention(out_of_budget)
    return Restart("resumed after the budget was extended", counted=False)


def after_done_checks(state: SupervisorState, now: datetime) -> Decision:
    """After a round of done checks (`done.record_round`), or an extension while its failure
    waits: finish, start the agent again with the failure, or wait for a person with the
    sandbox paused where it stands (an extension then starts the agent again)."""
    verdict = done.verdict(state, now)
    if verdict is None:
        return Finish()
    if isinstance(verdict, DoneRound):
        return verdict
    return NeedsAttention(verdict, in_place=True)


def _resume_after_daily_limit(state: SupervisorState, now: datetime) -> Decision:
    """Held only by the key's daily limit, so nothing failed: wake the sandbox kept paused at
    its lease end (the same agent goes on), or make the sandbox the limit refused. Neither
    counts as a restart (a restart that was due was counted when it was decided)."""
    out_of_budget = exhausted_reason(state, now)
    pending = state.attempts.pending_restart
    if out_of_budget is not None:
        return NeedsAttention(out_of_budget, pending_restart=pending)
    if state.sandbox_id is not None:
        return WakeAfterLease(paused_at=state.sandbox.lease_ends_at or now)
    return Restart(pending or "daily spending window reopened", counted=False)


def _stall_reason(state: SupervisorState) -> str:
    return f"{STALL_REASON}{_duration(state.spec.stall_seconds)}"


def is_stall(decision: Decision | None) -> bool:
    """A restart for a stall, now or pending a person's budget (its reason as `decide`
    words it)."""
    if isinstance(decision, Restart):
        return decision.reason.startswith(STALL_REASON)
    if isinstance(decision, NeedsAttention):
        return (decision.pending_restart or "").startswith(STALL_REASON)
    return False


def stall_deadline_of(state: SupervisorState) -> datetime | None:
    if state.progress.last_progress_at is None:
        return None
    return state.progress.last_progress_at + timedelta(seconds=state.spec.stall_seconds)


def next_wake(state: SupervisorState, now: datetime) -> datetime:
    """The earliest moment the supervisor must look again even if nothing happens."""
    wake = min(now + QUIET_WAKE, budget_deadline(state, now))
    if kit_requests.request_due(state, now, wait_room_hours(state, now)) is not None:
        # A request not yet acted on in this sandbox (a new sandbox's agent asking again what
        # was answered before: its checkpoint is no news): look at once.
        return now
    stall = stall_deadline_of(state)
    if stall is not None:
        wake = min(wake, stall)
        # And once at half of it, so the card says the stall is coming (runs begun with the
        # marker: the wake is a look more in their history).
        coming = stall_watch.seen_coming_at(state)
        if state.progress.progress_is_checkpoints and coming is not None and coming > now:
            wake = min(wake, coming)
    # In time to extend the lease, and (a safety net for a missed pause) just after its end.
    point = lease.extension_point(state)
    if point is not None and point > now:
        wake = min(wake, point)
    ends = state.sandbox.lease_ends_at
    if state.sandbox.lease_keeping and ends is not None and ends > now:
        wake = min(wake, ends + lease.LEASE_END_TOLERANCE)
    capture = snapshot.next_capture_at(state, now)
    if capture is not None:
        wake = min(wake, capture)
    return max(wake, now)


def restart_within_budget(state: SupervisorState, reason: str, now: datetime) -> Decision:
    """A restart if the budget allows one, else a wait for a person with the restart pending."""
    out_of_budget = exhausted_reason(state, now)
    if out_of_budget is not None:
        return NeedsAttention(out_of_budget, pending_restart=reason)
    if restarts_left(state) <= 0:
        used = state.attempts.restarts_used
        return NeedsAttention(
            f"restart budget used up ({used} of {state.budget.max_restarts})",
            pending_restart=reason,
        )
    return Restart(reason)


def is_loop(state: SupervisorState, reason: str) -> bool:
    """A restart for a coding agent's loop (its reason as `decide` first words it)."""
    return state.attempts.loop_exit and reason.startswith(LOOP_REASON)


def loop_reason(state: SupervisorState) -> str:
    """A coding agent's loop, as its adapter's last note names it (the checkpoint read as the
    adapter exited)."""
    summary = kept_facts(state.progress.checkpoint, state.progress.checkpoint_facts).summary
    note = summary.last_note if summary is not None else None
    if note:
        return f"{LOOP_REASON}: {note}"
    return f"{LOOP_REASON} (exit {LOOP_EXIT_CODE}: the same tool call over and over)"


def _sandbox_gone_reason(seen: Observation) -> str:
    if seen.sandbox_state == "missing":
        return "sandbox disappeared"
    if seen.stop_reason in ("lease_expired", "timeout", "time_limit", "lease_end", "expired"):
        return "sandbox time limit reached"
    return f"sandbox stopped ({seen.stop_reason or 'no reason given'})"


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def is_quiet(seen: Look) -> bool:
    """A look that saw nothing new (the agent runs, its checkpoint and requests unchanged)."""
    return isinstance(seen, Observation) and seen.checkpoint is None and seen.requests is None
