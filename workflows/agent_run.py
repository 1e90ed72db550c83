"""AgentRun: one durable supervisor per agent run.

The loop watches the agent through a long-poll activity that returns as soon as the agent exits,
its sandbox stops, or its checkpoint changes; `decide` turns each look into the next step, and
this class only carries the step out (the looks in `look_steps`, setting a sandbox aside in
`set_aside_steps`, the run's end in `ending_steps`). Signals wake the loop early.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from overnight.core.agent_spec import LOOP_REASON
    from overnight.core.models import RestartRecord, RunResult
    from workflows import (
        admission_steps,
        attention_steps,
        ci_steps,
        create_steps,
        delivery_steps,
        done_steps,
        end_steps,
        ending_steps,
        hopeless_steps,
        host_steps,
        kit_request_steps,
        lease_steps,
        model_steps,
        money_steps,
        same_sandbox_steps,
        set_aside_steps,
        snapshot_steps,
        stall_steps,
        start_steps,
        workspace_steps,
    )
    from workflows.calls import outcomes, sandbox, sandbox_lifecycle
    from workflows.look_steps import Looks
    from workflows.messages import RunMessages
    from workflows.notify_steps import Notifier
    from workflows.patches import CANCELED_PATCH, LEAN_WRITES_PATCH, SPEC_CHECK_PATCH
    from workflows.pure import budget, model_books, money
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
        KeepAgain,
        NeedsAttention,
        Restart,
        TakeSnapshot,
        WakeAfterLease,
        Watch,
        decide,
        is_loop,
        is_stall,
        loop_reason,
        restart_within_budget,
    )
    from workflows.pure.run_record import record_restart, sandbox_started
    from workflows.pure.snapshot import restore_for
    from workflows.pure.state import SupervisorState
    from workflows.rewind_messages import RewindMessages
    from workflows.visibility import Publisher


@workflow.defn(name="AgentRun")
class AgentRun(RunMessages, RewindMessages):
    """The loop and its steps; the signals, the updates and the query are `RunMessages`' and
    `RewindMessages`'."""

    def __init__(self) -> None:
        super().__init__()
        self._publisher = Publisher()
        self._notifier = Notifier()
        self._looks = Looks()

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
            if s.workspace.rewind_to is not None:
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
                seen = await self._looks.observe(s)
                if seen is None:
                    continue
                decision = decide(s, seen, workflow.now())
                if is_stall(decision) and await stall_steps.progress_read(s):
                    self._looks.watch_until = None
                    continue  # it had progressed: the look missed it
                if isinstance(decision, Watch):
                    await self._looks.watch(s, decision, quiet=self._looks.quiet(seen))
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
            self._looks.watch_until = None
            failed = await done_steps.start_again(s, decision)
            if failed is not None:
                await self._restart(s, failed)
        elif isinstance(decision, CiRound | KeepAgain):
            self._looks.watch_until = None
            if isinstance(decision, CiRound):
                failed = await ci_steps.start_again(s, decision, self._publish)
            else:
                failed = await workspace_steps.keep_again(s, self._publish)
            if failed is not None:
                await self._restart(s, failed)
        elif isinstance(decision, Restart):
            await self._restart(s, decision.reason, counted=decision.counted)
        elif isinstance(decision, NeedsAttention):
            await set_aside_steps.enter_attention(s, decision, self, self._looks, self._notifier)
        elif isinstance(decision, ExtendLease):
            await self._extend_lease(s, decision)
        elif isinstance(decision, WakeAfterLease):
            await self._wake_after_lease(s, decision)
        elif isinstance(decision, FailRun):
            why = "the agent's command cannot run"
            await set_aside_steps.set_aside(s, self._looks, why=why, ended="not runnable")
            await hopeless_steps.fail_run(s, decision, self._publish, self._notifier)
        elif isinstance(decision, TakeSnapshot):
            await snapshot_steps.take_snapshot(s, decision)
            self._looks.watch_until = None
        elif kit_request_steps.is_talk(decision):
            self._looks.watch_until = None
            follow_up = await kit_request_steps.act(s, decision, self._notifier, self._publish)
            if follow_up is not None:
                await self._act(s, follow_up)

    # ---- steps --------------------------------------------------------------------------

    async def _start_sandbox(self, s: SupervisorState, reason: str) -> None:
        if not await admission_steps.back_in(s, self._publish):
            return  # it gave its place back for a wait, and was cancelled queued again
        s.state = "starting" if s.attempt == 0 else "restarting"
        s.attempt += 1
        self._publish(s)
        cost_cap = budget.spend_left_micros(s, workflow.now()) if s.sandbox.lease_keeping else None
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
                await set_aside_steps.enter_attention(
                    s, held, self, self._looks, self._notifier, daily=True
                )
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
            s.attempts.pending_counted = s.fail_fast and bool(
                reason
            )  # its restart was decided already
            held = NeedsAttention(why, pending_restart=reason or why)
            await set_aside_steps.enter_attention(s, held, self, self._looks, self._notifier)
            return
        if started is None:
            return  # cancelled before the create began: the loop ends the run
        sandbox_started(s, started, workflow.now())
        host_steps.record_host(s, started)
        self._looks.watch_until = None

    async def _extend_lease(self, s: SupervisorState, decision: ExtendLease) -> None:
        await lease_steps.extend_lease(s, decision.until)
        self._looks.watch_until = None

    async def _wake_after_lease(self, s: SupervisorState, decision: WakeAfterLease) -> None:
        self._looks.watch_until = None
        woken = await lease_steps.wake_after_lease(s, decision.paused_at)
        if isinstance(woken, str):
            # The key's daily limit refused the fresh lease: the same agent waits, paused.
            budget.close_sandbox_spend(s, decision.paused_at)
            s.sandbox.sandbox_paused = True
            held = money_steps.daily_attention(s, woken, None)
            await set_aside_steps.enter_attention(
                s, held, self, self._looks, self._notifier, daily=True, keep_sandbox=True
            )
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
        self._looks.watch_until = None  # it runs, or the sandbox is looked at again at once

    async def _restart(self, s: SupervisorState, reason: str, *, counted: bool = True) -> None:
        salvaged = False
        if is_loop(s, reason):
            # A coding agent's adapter names the loop in the checkpoint it writes as it exits,
            # which the look that saw the exit may not have read: read it first.
            await set_aside_steps.salvage_checkpoint(s, self._looks, LOOP_REASON, LOOP_REASON)
            reason, salvaged = loop_reason(s), True
        now = workflow.now()
        record = RestartRecord(
            attempt=s.attempt,
            reason=reason,
            at=now,
            sandbox_id=s.sandbox_id,
            last_progress_at=s.progress.last_progress_at,
        )
        s.attempts.restarts.append(record)
        if counted:
            s.attempts.restarts_used += 1
        model_books.mark_loop_acted(s, reason)
        s.attempts.pending_restart = None
        await set_aside_steps.set_aside(s, self._looks, why=reason, ended=reason, salvaged=salvaged)
        record_restart(s, record)
        s.state = "restarting"
        self._notifier.tell(s, "restart", reason)
        await self._start_sandbox(s, reason)

    async def _end(self, s: SupervisorState, outcome: str) -> RunResult:
        return await ending_steps.end(s, outcome, self._looks, self._publish, self._notifier)

    def _publish(self, s: SupervisorState) -> None:
        now = workflow.now()
        status = build_status(s, now)
        self._publisher.publish(status, render_card(status, now), s.search_attributes or [], s.spec)
