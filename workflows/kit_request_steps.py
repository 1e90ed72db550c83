"""AgentRun's steps for the agent kit's requests: pause the sandbox for a question or a wait,
wake it, and write the answer where the kit's `ask()` / `wait_until()` finds it.

Workflow code (timers, and activities through `workflows.calls`); what a request means is in
`workflows.pure.kit_requests`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from overnight.core.output_tail import markdown_inline
    from workflows import admission_steps, attention_steps, host_steps, model_steps
    from workflows.calls import kit_requests as kit_requests_calls
    from workflows.calls import sandbox_lifecycle
    from workflows.notify_steps import Notifier
    from workflows.pure import budget, kit_requests, money
    from workflows.pure.decide import (
        AskPerson,
        Decision,
        DeliverAnswer,
        NeedsAttention,
        PauseUntil,
        WakeInPlace,
        restart_within_budget,
    )
    from workflows.pure.state import SupervisorState
    from workflows.same_sandbox_steps import after_wake

# The decisions these steps carry out, as `decide` makes them (its own imports of `talk`:
# the workflow sandbox may hold a second copy of that module).
TALK_DECISIONS = (AskPerson, PauseUntil, DeliverAnswer, WakeInPlace)
# What the answer file says when a `wait_until` was woken.
WOKEN = "woken"

Publish = Callable[[SupervisorState], None]


async def act(
    s: SupervisorState, decision: Decision, notifier: Notifier, publish: Publish
) -> Decision | None:
    """Carry out one of `talk`'s decisions; a follow-up (a restart) when the sandbox is gone."""
    if isinstance(decision, AskPerson):
        await _ask_person(s, decision, notifier)
    elif isinstance(decision, PauseUntil):
        await _pause_until(s, decision)
    elif isinstance(decision, DeliverAnswer):
        s.kit.request_handled = kit_requests.handled_key(s, decision.request_id)
        await answer_agent(s, decision.request_id, decision.answer)
    elif isinstance(decision, WakeInPlace):
        if not await admission_steps.back_in(s, publish):
            return None  # cancelled in the queue: the loop ends the run
        s.sandbox.paused_in_place = False
        await model_steps.follow_budget(s)  # its gateway's cap lifted before it wakes
        if not await _wake(s, "budget extended: the same agent goes on"):
            why = "sandbox paused for the budget could not be woken"
            return restart_within_budget(s, why, workflow.now())
        s.state = "running"
    return None


def is_talk(decision: Decision) -> bool:
    return isinstance(decision, TALK_DECISIONS)


def holding(s: SupervisorState) -> bool:
    """The run waits for an answer or for a wait's end (its sandbox paused)."""
    return s.kit.question is not None or s.kit.wait is not None


Held = Decision | attention_steps.Unanswered | None


async def hold(s: SupervisorState, notifier: Notifier, publish: Publish) -> Held:
    if s.kit.question is not None:
        return await _wait_for_answer(s, notifier, publish)
    return await _wait_out(s, publish)


async def pause_in_place(s: SupervisorState, reason: str) -> None:
    """The spend (or wait) budget ran out under a running agent: pause it where it stands
    (woken on extension, nothing redone) instead of setting the sandbox aside. A sandbox a
    wait left paused stays so."""
    if not (s.kit.wait_budget_kept and s.sandbox.sandbox_paused):
        await _pause(s, f"needs attention: {reason}")
    s.sandbox.paused_in_place = True


async def _ask_person(s: SupervisorState, decision: AskPerson, notifier: Notifier) -> None:
    request = decision.request
    s.kit.question = request
    s.kit.answer_given = None
    s.kit.request_handled = kit_requests.handled_key(s, request.id)
    await _pause(s, f"question {request.id} waits for a person")
    s.kit.waiting_since = workflow.now()
    s.state = "waiting_for_answer"
    workflow.logger.info("the agent asks: %s", request.question)
    notifier.tell(s, "waiting_for_answer", kit_requests.question_text(request))


async def _pause_until(s: SupervisorState, decision: PauseUntil) -> None:
    request = decision.request
    s.kit.wait = request
    s.kit.waiting_until = decision.until
    kit_requests.mark_wait(s, request.id)
    # The agent's reason goes into the pause's summary, Markdown in the Web UI: as written.
    reason = markdown_inline(request.reason) if request.reason else "agent asked"
    await _pause(s, f"wait until {decision.until:%H:%M} UTC: {reason}")
    s.kit.waiting_since = workflow.now()
    long = decision.until - s.kit.waiting_since >= admission_steps.STEP_OUT_AFTER
    if long and s.sandbox.sandbox_paused:
        await admission_steps.step_out(s)


async def _wait_for_answer(s: SupervisorState, notifier: Notifier, publish: Publish) -> Held:
    """Until the `answer` update (or a cancel). Unanswered for `attention_hours` (or past the
    wait budget), the run needs attention; for twice `attention_hours`, it fails. Unanswered
    for `STEP_OUT_AFTER`, it gives its admission place back."""
    assert s.kit.question is not None and s.kit.waiting_since is not None
    hours = s.spec.attention_hours
    phases = 2 if s.state == "needs_attention" else 1
    deadline = s.kit.waiting_since + timedelta(hours=hours * phases)
    now = workflow.now()
    wait_ends = None
    if s.kit.wait_budget_kept and phases == 1:
        wait_ends = now + timedelta(hours=budget.wait_room_hours(s, now))
    step_out = (
        admission_steps.step_out_at(s, s.kit.waiting_since) if s.sandbox.sandbox_paused else None
    )
    wake_at = min(t for t in (deadline, wait_ends, step_out) if t is not None)
    try:
        await workflow.wait_condition(
            lambda: s.kit.answer_given is not None or s.cancel_requested,
            timeout=max(wake_at - now, timedelta(seconds=1)),
            timeout_summary="waiting for an answer to the agent's question",
        )
    except TimeoutError:
        if step_out is not None and wake_at == step_out:
            await admission_steps.step_out(s)
            return None
        if s.state == "needs_attention":
            return attention_steps.Unanswered()
        s.state = "needs_attention"
        s.attention.attention_reason = f"the agent's question waited {hours:g} h unanswered"
        if wait_ends is not None and wake_at == wait_ends and wait_ends < deadline:
            s.attention.attention_reason = budget.wait_exhausted_reason(s, workflow.now())
        notifier.tell(
            s, "needs_attention", f"{s.attention.attention_reason}: {s.kit.question.question}"
        )
        return None
    if s.cancel_requested:
        return None
    question, answer = s.kit.question, s.kit.answer_given
    assert answer is not None
    if s.kit.wait_budget_kept:
        _done_waiting(s)
        if not await admission_steps.back_in(s, publish):
            return None
    woken = await _wake(s, f"question {question.id} answered")
    _done_waiting(s)
    s.kit.question = None
    s.kit.answer_given = None
    s.attention.attention_reason = None
    if not woken:
        # The next attempt's agent asks again and is answered at once (`DeliverAnswer`).
        why = "sandbox paused for a question could not be woken"
        return restart_within_budget(s, why, workflow.now())
    s.state = "running"
    await answer_agent(s, question.id, answer)
    return None


async def _wait_out(s: SupervisorState, publish: Publish) -> Decision | None:
    assert s.kit.wait is not None and s.kit.waiting_until is not None
    request, until = s.kit.wait, s.kit.waiting_until
    try:
        await workflow.wait_condition(
            lambda: s.cancel_requested,
            timeout=max(until - workflow.now(), timedelta(seconds=1)),
            timeout_summary=f"agent paused until {until:%Y-%m-%d %H:%M} UTC",
        )
    except TimeoutError:
        pass
    if s.cancel_requested:
        return None
    if s.kit.wait_budget_kept:
        if request.until - workflow.now() >= kit_requests.LEAST_PAUSE:
            return _cut_short(s)  # the wait budget ended it before the agent's time
        _done_waiting(s)
        if not await admission_steps.back_in(s, publish):
            return None
    woken = await _wake(s, f"wait until {until:%H:%M} UTC over")
    _done_waiting(s)
    s.kit.wait = None
    s.kit.waiting_until = None
    if not woken:
        why = "sandbox paused for a wait could not be woken"
        return restart_within_budget(s, why, workflow.now())
    await answer_agent(s, request.id, WOKEN)
    return None


def _cut_short(s: SupervisorState) -> Decision | None:
    """A wait the wait budget clipped, at its clipped end: waited on when the budget was
    extended meanwhile (None: held on to a later end), else the run needs attention, its
    sandbox still paused; the wait is acted on again once the budget is extended."""
    assert s.kit.wait is not None
    now = workflow.now()
    later = min(s.kit.wait.until, now + timedelta(hours=budget.wait_room_hours(s, now)))
    if later - now >= kit_requests.LEAST_PAUSE:
        s.kit.waiting_until = later
        return None
    _done_waiting(s)
    s.kit.wait = None
    s.kit.waiting_until = None
    kit_requests.unmark_wait(s)
    return NeedsAttention(budget.wait_exhausted_reason(s, now), in_place=True)


async def _pause(s: SupervisorState, why: str) -> None:
    assert s.sandbox_id is not None
    settled = await sandbox_lifecycle.pause_or_stop(
        s.spec, s.sandbox_id, stop=False, why=why, route=host_steps.current_route(s)
    )
    if settled is None or settled.state != "paused":
        workflow.logger.warning("sandbox %s not paused (%s): it runs on", s.sandbox_id, why)
        return
    budget.close_sandbox_spend(s, workflow.now())
    s.sandbox.sandbox_paused = True


async def _wake(s: SupervisorState, why: str, *, agent_ended: bool = False) -> bool:
    """The same sandbox carries on (a fresh lease); False when it could not be woken (or its
    agent, which its pause ended, could not be started again). `agent_ended`: its agent had
    exited before the pause (a done check's), so none is started again after the wake."""
    assert s.sandbox_id is not None
    was_paused = s.sandbox.sandbox_paused
    room = money.next_lease_micros(s) if money.keeps_account(s) else None
    info = await sandbox_lifecycle.wake_sandbox(
        s.spec, s.sandbox_id, why, daily_room_micros=room, route=host_steps.current_route(s)
    )
    if (
        isinstance(info, sandbox_lifecycle.DailyLimitRefused)
        or info is None
        or info.state != "running"
    ):
        return False
    now = workflow.now()
    if s.sandbox.sandbox_started_at is None:
        s.sandbox.sandbox_started_at = now
    s.sandbox.lease_ends_at = info.lease_ends_at
    s.sandbox.lease_extended_at = now
    s.sandbox.sandbox_paused = False
    # The stall clock starts again from the wake.
    s.progress.last_progress_at = now
    if agent_ended:
        return True
    return await after_wake(s, info, was_paused=was_paused)


async def wake_in_place(s: SupervisorState, why: str, *, agent_ended: bool) -> bool:
    """Wake a sandbox paused where it stood for a person (`pause_in_place`)."""
    s.sandbox.paused_in_place = False
    return await _wake(s, why, agent_ended=agent_ended)


def _done_waiting(s: SupervisorState) -> None:
    if s.kit.waiting_since is not None:
        s.kit.waited_seconds += max(0.0, (workflow.now() - s.kit.waiting_since).total_seconds())
    s.kit.waiting_since = None


async def answer_agent(s: SupervisorState, request_id: str, answer: str) -> None:
    """Best effort: an answer that cannot be written is given again when the agent asks again
    (after a restart the kit finds it; a lost write leaves the question to the next attempt)."""
    await kit_requests_calls.answer_agent(s, host_steps.current_route(s), request_id, answer)
