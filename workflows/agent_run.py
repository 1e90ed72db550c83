"""AgentRun: one durable supervisor per agent run.

The loop watches the agent through a long-poll activity that returns as soon as the agent exits,
its sandbox stops, or its checkpoint changes; `decide` turns each look into the next step, and
this class only carries the step out. Signals wake the loop early.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.models import CheckpointRead, Observation
    from overnight.agent_spec import LOOP_REASON
    from overnight.models import RestartRecord, RunResult
    from workflows import (
        admission_steps,
        attention_steps,
        ci_steps,
        create_steps,
        delivery_steps,
        done_steps,
        end_steps,
        hopeless_steps,
        host_steps,
        kit_request_steps,
        lease_steps,
        model_steps,
        money_steps,
        same_sandbox_steps,
        snapshot_steps,
        stall_steps,
        start_steps,
        workspace_steps,
    )
    from workflows.calls import checkpoints, observe, outcomes, routing, sandbox, sandbox_lifecycle
    from workflows.messages import RunMessages
    from workflows.notify_steps import Notifier
    from workflows.patches import (
        BOOKS_ARE_NEWS_PATCH,
        CANCELED_PATCH,
        LEAN_WRITES_PATCH,
        PROGRESS_MARK_PATCH,
        SPEC_CHECK_PATCH,
    )
    from workflows.pure import budget, delivery, model_books, money, safety_net
    from workflows.pure.card import build_status, render_card
    from workflows.pure.decide import (
        CiRound,
        Decision,
        DeliverAgain,
        DoneRound,
        ExtendLease,
        FailRun,
        Finish,
        FreshStart,
        HostLost,
        KeepAgain,
        Look,
        NeedsAttention,
        ObserveFailed,
        Restart,
        TakeSnapshot,
        WakeAfterLease,
        Watch,
        decide,
        is_loop,
        is_quiet,
        is_stall,
        loop_reason,
        next_wake,
        restart_within_budget,
        stall_deadline_of,
    )
    from workflows.pure.egress import take_refusals
    from workflows.pure.hosts import Route
    from workflows.pure.notifications import attention_text
    from workflows.pure.run_record import (
        note_last_words,
        record_restart,
        run_result,
        sandbox_started,
        take_checkpoint,
        take_requests_file,
    )
    from workflows.pure.snapshot import restore_for
    from workflows.pure.state import SupervisorState
    from workflows.rewind_messages import RewindMessages
    from workflows.visibility import Publisher

# Quiet observations that come back this much before their deadline are waited out on a timer.
EARLY_RETURN_SLACK = timedelta(seconds=1)
# Looks at the stall deadline that may run out of time in a row (workers dying, about 10 s
# each) before the sandbox is taken as no longer answering: about as long as a plain look's
# retries take to give up (policies.OBSERVE_RETRY).
DEADLINE_LOOKS_LOST_AT_MOST = 30


@workflow.defn(name="AgentRun")
class AgentRun(RunMessages, RewindMessages):
    """The loop and its steps; the signals, the updates and the query are `RunMessages`' and
    `RewindMessages`'."""

    def __init__(self) -> None:
        super().__init__()
        self._publisher = Publisher()
        self._notifier = Notifier()
        self._watch_until: datetime | None = None
        self._deadline_looks_lost = 0  # in a row (`_deadline_look_lost`)
        self._books_news = False  # the last look brought grown gateway books

    # The input is a `RunSpec` (and, after continue-as-new, the carried `SupervisorState`), taken
    # raw and validated here: a payload that does not fit must fail the run at once as
    # `InvalidSpec`, naming its fields, not fail the workflow task forever in the decoder.
    @workflow.run
    async def run(self, spec: Any, carried: Any = None) -> RunResult:
        # Runs begun with LEAN_WRITES_PATCH have every earlier marker's behaviour: one marker
        # (and one TemporalChangeVersion upsert) at their start rather than one per patch.
        lean = workflow.patched(LEAN_WRITES_PATCH)
        s, begins_here = start_steps.begin(spec, carried, lean)
        self._s = s
        if begins_here and workflow.patched(SPEC_CHECK_PATCH):
            await start_steps.refuse_unless_granted(s)
        try:
            return await self._supervise(s)
        except asyncio.CancelledError:
            # Temporal cancellation: clean up like a `cancel` signal, then end as Canceled (the
            # `cancel` signal is the graceful stop that completes with outcome `cancelled`).
            s.cancel_requested = True
            s.cancel_reason = s.cancel_reason or "cancelled through Temporal"
            result = await self._end(s, "cancelled")
            if lean or workflow.patched(CANCELED_PATCH):
                raise
            return result

    # ---- the loop -------------------------------------------------------------------------

    async def _supervise(self, s: SupervisorState) -> RunResult:
        if s.search_attributes is None:
            s.search_attributes = await sandbox.present_search_attributes()
        if s.attempt == 0 and await admission_steps.admitted(s, self._publish):
            await self._start_sandbox(s, reason="")
        while True:
            self._publish(s)
            if s.cancel_requested:
                return await self._end(s, "cancelled")
            if s.rewind_to is not None:
                await workspace_steps.rewind(s, self._restart)
                continue
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                await self._notifier.settle()
                workflow.continue_as_new(args=[s.spec, s])
            if kit_request_steps.holding(s) or s.state == "needs_attention":
                waited = await self._wait(s)
                if isinstance(waited, attention_steps.Unanswered):
                    s.state = "failed"
                    self._publish(s)
                    await attention_steps.give_up(s, self._notifier)
                decision = waited
            else:
                await model_steps.follow_budget(s)  # an extension lifts the gateway's cap
                seen = await self._observe(s)
                if seen is None:
                    continue
                decision = decide(s, seen, workflow.now())
                if is_stall(decision) and await stall_steps.progress_read(s):
                    self._watch_until = None
                    continue  # it had progressed: the look missed it
                if isinstance(decision, Watch):
                    await self._watch(s, decision, quiet=self._quiet(seen))
                    continue
            if isinstance(decision, Finish):
                decision = await done_steps.after_exit_zero(s, self._publish)
                if isinstance(decision, Finish):  # finished only once its work is delivered
                    decision = await delivery_steps.deliver(s, self._publish)
            elif isinstance(decision, DeliverAgain):
                decision = await delivery_steps.deliver(s, self._publish)
            if decision is None:
                continue
            if isinstance(decision, Finish):
                return await self._end(s, "finished")
            await self._act(s, decision)

    async def _wait(self, s: SupervisorState) -> kit_request_steps.Held:
        if kit_request_steps.holding(s):
            return await kit_request_steps.hold(s, self._notifier, self._publish)
        return await attention_steps.wait_for_person(s, self)

    async def _act(self, s: SupervisorState, decision: Decision) -> None:
        if isinstance(decision, FreshStart):
            await self._fresh_start(s)
        elif isinstance(decision, DoneRound):
            self._watch_until = None
            failed = await done_steps.start_again(s, decision)
            if failed is not None:
                await self._restart(s, failed)
        elif isinstance(decision, CiRound | KeepAgain):
            self._watch_until = None
            if isinstance(decision, CiRound):
                failed = await ci_steps.start_again(s, decision, self._publish)
            else:
                failed = await workspace_steps.keep_again(s, self._publish)
            if failed is not None:
                await self._restart(s, failed)
        elif isinstance(decision, Restart):
            await self._restart(s, decision.reason, counted=decision.counted)
        elif isinstance(decision, NeedsAttention):
            await self._enter_attention(s, decision)
        elif isinstance(decision, ExtendLease):
            await self._extend_lease(s, decision)
        elif isinstance(decision, WakeAfterLease):
            await self._wake_after_lease(s, decision)
        elif isinstance(decision, FailRun):
            await self._set_aside(s, why="the agent's command cannot run", ended="not runnable")
            await hopeless_steps.fail_run(s, decision, self._publish, self._notifier)
        elif isinstance(decision, TakeSnapshot):
            await snapshot_steps.take_snapshot(s, decision)
            self._watch_until = None
        elif kit_request_steps.is_talk(decision):
            self._watch_until = None
            follow_up = await kit_request_steps.act(s, decision, self._notifier, self._publish)
            if follow_up is not None:
                await self._act(s, follow_up)

    async def _observe(self, s: SupervisorState) -> Look | None:
        """One long poll; None when a signal interrupted it (or its host's queue kept it
        waiting, its host not lost: look again)."""
        assert s.sandbox_id is not None and s.process_id is not None
        now = workflow.now()
        until = self._watch_until or next_wake(s, now)
        wait = max(0.0, (until - now).total_seconds())
        stall = stall_deadline_of(s)
        at_deadline = stall is not None and until >= stall
        route = host_steps.current_route(s)
        handle = observe.start_observe(s, wait, at_deadline=at_deadline, route=route)
        try:
            await workflow.wait_condition(lambda: handle.done() or _interrupted(s))
        finally:
            if not handle.done():
                handle.cancel()
                # Its end (the cancellation) is nobody's news: read, so it is not logged as lost.
                handle.add_done_callback(lambda done: done.cancelled() or done.exception())
        if _interrupted(s):
            return None
        try:
            seen: Observation = handle.result()
        except ActivityError as err:
            outcomes.reraise_cancellation(err)
            if outcomes.handed_over(err):
                return None  # its last attempt ended with its worker's shutdown: look again
            if observe.deadline_look_bounded(at_deadline) and observe.lost_at_deadline(err):
                return await self._deadline_look_lost(s, route, err)
            if route.task_queue is not None and routing.waited_unstarted(err):
                # No worker of its host took it: a restart there costs nothing, a lost host
                # costs the work since the checkpoint.
                lost = await host_steps.host_lost(s, route.task_queue)
                return None if lost is None else HostLost(lost)
            return ObserveFailed(outcomes.describe(err))
        self._deadline_looks_lost = 0
        host_steps.host_seen(s, route.task_queue)
        self._take_checkpoint(s, seen.checkpoint)
        running = seen.sandbox_state == "running"
        await workspace_steps.keep_if_changed(s, running=running, hold=running)
        if take_requests_file(s, seen.requests):
            self._watch_until = None
        money.take_money(s, seen.money, workflow.now())
        take_refusals(s, s.sandbox_id, seen.egress_refused)
        self._books_news = model_books.news(s, seen.gateway_books)
        model_books.take_books(s, seen.gateway_books)
        s.watch_token = seen.watch_token
        s.sandbox_paused = seen.sandbox_state == "paused"
        # A paused sandbox's reported end is judged beside the run's record (lease.lease_ended),
        # not over it; a wake brings the fresh lease's end.
        paused_kept = s.lease_end_either and seen.sandbox_state == "paused"
        if seen.lease_ends_at is not None and not paused_kept:
            s.lease_ends_at = seen.lease_ends_at
        return seen

    async def _deadline_look_lost(
        self, s: SupervisorState, route: Route, err: ActivityError
    ) -> Look | None:
        """The look ending at the stall deadline ran out of time (its worker died, or its
        retry's): look again now, briefly, rather than wait out a retry's timeouts. Only a
        sandbox that stays silent for `DEADLINE_LOOKS_LOST_AT_MOST` such looks in a row is
        taken as no longer answering; one whose host's queue went unpolled, as lost."""
        self._deadline_looks_lost += 1
        if route.task_queue is not None:
            lost = await host_steps.host_lost(s, route.task_queue)
            if lost is not None:
                return HostLost(lost)
        if self._deadline_looks_lost >= DEADLINE_LOOKS_LOST_AT_MOST:
            return ObserveFailed(outcomes.describe(err))
        return None

    def _quiet(self, seen: Look) -> bool:
        """A look that saw nothing new. Grown gateway books are news: the look came back early
        for them, and the agent may exit right after its model call (a CLI's last answer)."""
        if not is_quiet(seen):
            return False
        return not (self._books_news and workflow.patched(BOOKS_ARE_NEWS_PATCH))

    async def _watch(self, s: SupervisorState, decision: Watch, *, quiet: bool) -> None:
        self._watch_until = decision.until
        early = decision.until - workflow.now()
        if quiet and early > EARLY_RETURN_SLACK:
            # The look came back early with nothing new: wait out the rest durably.
            try:
                await workflow.wait_condition(
                    lambda: _interrupted(s),
                    timeout=early,
                    timeout_summary="quiet agent: next look",
                )
            except TimeoutError:
                pass
            self._watch_until = None

    def _take_checkpoint(self, s: SupervisorState, read: CheckpointRead | None) -> None:
        taken, refused = take_checkpoint(
            s, read, workflow.now(), by_progress_mark=lambda: workflow.patched(PROGRESS_MARK_PATCH)
        )
        if refused:
            workflow.logger.warning("checkpoint not taken: %s", refused)
        if taken:
            self._watch_until = None

    # ---- steps --------------------------------------------------------------------------

    async def _start_sandbox(self, s: SupervisorState, reason: str) -> None:
        if not await admission_steps.back_in(s, self._publish):
            return  # it gave its place back for a wait, and was cancelled queued again
        s.state = "starting" if s.attempt == 0 else "restarting"
        s.attempt += 1
        self._publish(s)
        cost_cap = budget.spend_left_micros(s, workflow.now()) if s.lease_keeping else None
        restore = restore_for(s)
        lease_cost = money.next_lease_micros(s) if money.keeps_account(s) else None
        try:
            started = await create_steps.create(
                s, reason, cost_cap, restore, lease_cost, self._publish
            )
        except ActivityError as err:
            if s.cancel_requested:
                return  # the loop ends the run and sweeps up whatever the create made
            outcomes.reraise_cancellation(err)
            if outcomes.error_type(err) == sandbox_lifecycle.DAILY_LIMIT_TYPE:
                # Refused before anything was made: wait for the key's daily window.
                held = money_steps.daily_attention(s, outcomes.describe(err), reason)
                await self._enter_attention(s, held, daily=True)
                return
            if outcomes.error_type(err) == "SandboxGone":
                # Its time limit passed while the create was retried: go on in the next one.
                why = f"sandbox {s.attempt} ended before the agent started"
                await self._act(s, restart_within_budget(s, why, workflow.now()))
                return
            failed = hopeless_steps.after_create_failed(s, err)
            if failed is not None:
                await hopeless_steps.fail_run(s, failed, self._publish, self._notifier)
            why = f"could not create sandbox {s.attempt}: {outcomes.describe(err)}"
            await end_steps.sweep(s, stop=True, paused_too=False, why="half-made sandbox")
            s.pending_counted = s.fail_fast and bool(reason)  # its restart was decided already
            await self._enter_attention(s, NeedsAttention(why, pending_restart=reason or why))
            return
        if started is None:
            return  # cancelled before the create began: the loop ends the run
        sandbox_started(s, started, workflow.now())
        host_steps.record_host(s, started)
        self._watch_until = None

    async def _extend_lease(self, s: SupervisorState, decision: ExtendLease) -> None:
        await lease_steps.extend_lease(s, decision.until)
        self._watch_until = None

    async def _wake_after_lease(self, s: SupervisorState, decision: WakeAfterLease) -> None:
        self._watch_until = None
        woken = await lease_steps.wake_after_lease(s, decision.paused_at)
        if isinstance(woken, str):
            # The key's daily limit refused the fresh lease: the same agent waits, paused.
            budget.close_sandbox_spend(s, decision.paused_at)
            s.sandbox_paused = True
            held = money_steps.daily_attention(s, woken, None)
            await self._enter_attention(s, held, daily=True, keep_sandbox=True)
        elif not woken:
            why = "sandbox paused at its lease end and could not be woken"
            await self._act(s, restart_within_budget(s, why, workflow.now()))
        else:
            s.state = "running"

    async def _fresh_start(self, s: SupervisorState) -> None:
        failed = await same_sandbox_steps.fresh_start(s)
        if isinstance(failed, str):
            await self._restart(s, failed)
            return
        self._watch_until = None  # it runs, or the sandbox is looked at again at once

    async def _restart(self, s: SupervisorState, reason: str, *, counted: bool = True) -> None:
        salvaged = False
        if is_loop(s, reason):
            # A coding agent's adapter names the loop in the checkpoint it writes as it exits,
            # which the look that saw the exit may not have read: read it first.
            await self._salvage_checkpoint(s, LOOP_REASON, LOOP_REASON)
            reason, salvaged = loop_reason(s), True
        now = workflow.now()
        record = RestartRecord(
            attempt=s.attempt,
            reason=reason,
            at=now,
            sandbox_id=s.sandbox_id,
            last_progress_at=s.last_progress_at,
        )
        s.restarts.append(record)
        if counted:
            s.restarts_used += 1
        model_books.mark_loop_acted(s, reason)
        s.pending_restart = None
        await self._set_aside(s, why=reason, ended=reason, salvaged=salvaged)
        record_restart(s, record)
        s.state = "restarting"
        self._notifier.tell(s, "restart", reason)
        await self._start_sandbox(s, reason)

    async def _enter_attention(
        self,
        s: SupervisorState,
        decision: NeedsAttention,
        *,
        daily: bool = False,
        keep_sandbox: bool = False,
    ) -> None:
        """`daily`: held only by the key's daily spending limit (goes on by itself when its
        window reopens); `keep_sandbox`: the sandbox is already paused and will be woken."""
        s.attention_reason = decision.reason
        s.pending_restart = decision.pending_restart
        s.attention_since = workflow.now()
        s.daily_window_wait = daily
        self.budget_changed = False
        ended = decision.pending_restart or decision.reason
        if decision.in_place and s.sandbox_id is not None:
            await kit_request_steps.pause_in_place(s, decision.reason)
        elif not keep_sandbox:
            await self._set_aside(s, why=f"needs attention: {decision.reason}", ended=ended)
        # Only once the sandbox is paused: `needs_attention` promises nothing runs.
        s.state = "needs_attention"
        workflow.logger.warning("run needs attention: %s", decision.reason)
        why = attention_text(decision.reason, decision.pending_restart)
        self._notifier.tell(s, "needs_attention", why)

    async def _set_aside(
        self, s: SupervisorState, *, why: str, ended: str, salvaged: bool = False
    ) -> None:
        """Copy the checkpoint (and the agent's last words: `ended` says why it ended; not
        again when `salvaged` already) and pause the current sandbox, kept for a look."""
        if s.sandbox_id is None:
            return
        if not salvaged:
            await self._salvage_checkpoint(s, why, ended)
        safety_net.noticed(s, workflow.now())
        await money_steps.end_sandbox(s, stop=False, why=why)
        s.paused_sandboxes.append(s.sandbox_id)
        s.sandbox_id = None
        s.process_id = None
        s.lease_ends_at = None
        s.watch_token = None

    async def _salvage_checkpoint(self, s: SupervisorState, why: str, ended: str) -> None:
        if s.sandbox_id is None:
            return
        # A sandbox may have paused at its lease end since the run last looked (its worker
        # died, the read was retried late): salvaging wakes it, whatever the last look said.
        wake = s.lease_keeping
        read = await checkpoints.read_checkpoint(
            s.spec,
            s.sandbox_id,
            s.seen_digest,
            why,
            wake_paused=wake,
            output_of=s.process_id,
            requests_path=checkpoints.requests_path_of(s),
            known_requests_digest=s.requests_digest,
            route=host_steps.current_route(s),
        )
        self._take_checkpoint(s, read)
        await workspace_steps.keep_if_changed(s)
        if read is not None:
            take_requests_file(s, read.requests)
            note_last_words(s, read.output_tail, ended, workflow.now())

    async def _end(self, s: SupervisorState, outcome: str) -> RunResult:
        s.state = "finishing"
        self._publish(s)
        why = "run finished" if outcome == "finished" else f"run cancelled: {s.cancel_reason}"
        ended = "finished (exit 0)" if outcome == "finished" else f"cancelled: {s.cancel_reason}"
        keep = s.spec.keep_sandboxes
        if s.sandbox_id is not None:
            await self._salvage_checkpoint(s, why, ended)
            if delivery.work_only_in_sandbox(s):
                # Cancelled while its work waits for the origin: its sandbox is kept paused,
                # as a failed attempt's is (for `keep_failed_days`), never stopped.
                await money_steps.end_sandbox(s, stop=False, why=f"{why}; its work is only here")
                s.paused_sandboxes.append(s.sandbox_id)
                s.sandbox_id = None
            else:
                await money_steps.end_sandbox(s, stop=not keep, why=why)
        await end_steps.sweep_at_end(s, why=why)
        if not keep:
            await snapshot_steps.delete_all(s, why)
        s.state = "finished" if outcome == "finished" else "cancelled"
        s.process_id = None
        self._publish(s)
        if outcome == "finished":
            self._notifier.tell(s, "finished", f"finished after {s.attempt} attempt(s)")
        else:
            self._notifier.tell(s, "cancelled", s.cancel_reason or "cancelled")
        await self._notifier.settle()
        return run_result(s, workflow.now())

    def _publish(self, s: SupervisorState) -> None:
        now = workflow.now()
        status = build_status(s, now)
        self._publisher.publish(status, render_card(status, now), s.search_attributes or [], s.spec)


def _interrupted(s: SupervisorState) -> bool:
    """A message the loop acts on at once: a cancel, or a rewind."""
    return s.cancel_requested or s.rewind_to is not None
