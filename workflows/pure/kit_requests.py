"""What the agent asks of its supervisor through the kit, and what the run does about it. Pure.

The requests arrive in the kit's requests file beside the checkpoint (runs begun with
`agent-requests-file`) and in the checkpoint's `overnight` key (agents of the first protocol;
`requests_now` merges them, overnight.core.agent_requests): a question for a person, a wait until a
usage window resets, the model spend so far, the results. A question pauses the
sandbox until the `answer` update; a wait pauses it until its time (at most what the wait
budget, `Budget.max_wait_hours`, has left); either way the same process goes on. The time
paused is neither run time nor a stall; it counts against the wait budget. Model spend
counts in the spend budget, summed over the agent's processes ("streams"), each report
cumulative within its stream, so a report read twice (or carried to the next attempt in the
checkpoint) is counted once. It lives in the workflow's state, not only in the
checkpoint: money an attempt spent is spent even when the attempt's work is lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from overnight.core.agent_requests import (
    AgentRequests,
    AgentTalk,
    AskRequest,
    ModelUsage,
    WaitRequest,
    merged,
    usages,
)
from workflows.pure.state import SupervisorState

# Shorter waits are slept through by the agent: a pause and a wake cost more than they save.
LEAST_PAUSE = timedelta(seconds=30)
# Model usage streams kept apart; older ones fold into one sum (a run has a few dozen).
MAX_STREAMS = 200
# Answers kept by id (an agent restarted from an older checkpoint may ask again).
MAX_ANSWERS = 100


@dataclass(frozen=True)
class AskPerson:
    """Pause the sandbox, tell the run's webhooks, wait for the `answer` update."""

    request: AskRequest


@dataclass(frozen=True)
class PauseUntil:
    """Pause the sandbox until `until` (the request's time, or earlier when the budget ends)."""

    request: WaitRequest
    until: datetime


@dataclass(frozen=True)
class WaitOverBudget:
    """The agent asks to wait and the wait budget (`Budget.max_wait_hours`) is used up: a
    person decides, its sandbox paused where it stands (an extension wakes it to wait on)."""

    request: WaitRequest


@dataclass(frozen=True)
class DeliverAnswer:
    """This question was answered before (an earlier attempt asked it): hand the answer over
    without pausing."""

    request_id: str
    answer: str


@dataclass(frozen=True)
class WakeInPlace:
    """Wake the sandbox paused where it stands (the budget was extended): the same agent goes
    on, nothing redone."""


TalkDecision = AskPerson | PauseUntil | DeliverAnswer | WaitOverBudget


def request_due(state: SupervisorState, now: datetime, room_hours: float) -> TalkDecision | None:
    """The agent's request the run has not acted on in this sandbox yet, if any. A wait is
    clipped to `room_hours` (`budget.wait_room_hours`)."""
    if not state.kit.agent_requests or state.sandbox_id is None:
        return None
    asked = requests_now(state)
    if asked is None:
        return None
    if asked.ask is not None and handled_key(state, asked.ask.id) != state.kit.request_handled:
        known = state.kit.answers.get(asked.ask.id)
        if known is not None:
            return DeliverAnswer(asked.ask.id, known)
        return AskPerson(asked.ask)
    wait = asked.wait
    if wait is not None and handled_key(state, wait.id) != wait_mark(state):
        until = min(wait.until, now + timedelta(hours=max(0.0, room_hours)))
        if until - now >= LEAST_PAUSE:
            return PauseUntil(wait, until)
        if state.kit.wait_budget_kept and wait.until - now >= LEAST_PAUSE:
            return WaitOverBudget(wait)
    return None


def handled_key(state: SupervisorState, request_id: str) -> str:
    return f"{state.sandbox_id}:{request_id}"


def wait_mark(state: SupervisorState) -> str | None:
    """The mark of the last wait acted on: its own, or (runs begun before they were kept
    apart) the one mark it shares with questions."""
    return state.kit.wait_handled if state.kit.talk_marks_apart else state.kit.request_handled


def mark_wait(state: SupervisorState, request_id: str) -> None:
    if state.kit.talk_marks_apart:
        state.kit.wait_handled = handled_key(state, request_id)
    else:
        state.kit.request_handled = handled_key(state, request_id)


def unmark_wait(state: SupervisorState) -> None:
    """The wait was cut short by its budget: acted on again once the budget is extended."""
    state.kit.wait_handled = None


def requests_now(state: SupervisorState) -> AgentRequests | None:
    """What the agent asks now: its checkpoint's `overnight` key and (runs begun since it was
    read) its requests file, the file's request where both hold one of a kind."""
    facts = state.progress.checkpoint_facts
    in_checkpoint = facts.requests if facts is not None else None
    if not state.kit.requests_file:
        return in_checkpoint
    return merged(state.kit.file_requests, in_checkpoint)


def take_requests(state: SupervisorState) -> None:
    """What a newly taken checkpoint (or requests file) reports: model spend and results."""
    asked = requests_now(state) if state.kit.agent_requests else None
    if asked is None:
        return
    state.kit.request_refused = asked.refused
    if asked.finish is not None:
        state.kit.outputs = asked.finish
    if not state.kit.requests_file:
        _take_usage(state, asked.usage)
        return
    facts = state.progress.checkpoint_facts
    for usage in usages(state.kit.file_requests, facts.requests if facts is not None else None):
        _take_usage(state, usage)


def _take_usage(state: SupervisorState, usage: ModelUsage | None) -> None:
    if usage is None:
        return
    known = state.money.model_usage.get(usage.stream)
    if known is not None and known.usd >= usage.usd:
        return  # cumulative: an older report (or the same one again) adds nothing
    state.money.model_usage[usage.stream] = usage
    while len(state.money.model_usage) > MAX_STREAMS:
        oldest = next(iter(state.money.model_usage))
        state.money.model_usd_folded += state.money.model_usage.pop(oldest).usd


def model_usd(state: SupervisorState) -> float:
    return state.money.model_usd_folded + sum(
        usage.usd for usage in state.money.model_usage.values()
    )


def record_answer(state: SupervisorState, answer: str) -> None:
    assert state.kit.question is not None
    state.kit.answer_given = answer
    state.kit.answers[state.kit.question.id] = answer
    while len(state.kit.answers) > MAX_ANSWERS:
        state.kit.answers.pop(next(iter(state.kit.answers)))


def waited_seconds(state: SupervisorState, now: datetime) -> float:
    """Time paused for a question or a wait so far (not run time)."""
    waited = state.kit.waited_seconds
    if state.kit.waiting_since is not None:
        waited += max(0.0, (now - state.kit.waiting_since).total_seconds())
    return waited


def talk_view(state: SupervisorState) -> AgentTalk | None:
    """What the status shows of it (None for runs that do not speak the kit's protocol)."""
    if not state.kit.agent_requests:
        return None
    question = state.kit.question if state.kit.answer_given is None else None
    wait = state.kit.wait
    return AgentTalk(
        question=question.question if question is not None else None,
        choices=list(question.choices) if question is not None else [],
        asked_at=state.kit.waiting_since if question is not None else None,
        waiting_until=state.kit.waiting_until if wait is not None else None,
        waiting_reason=wait.reason if wait is not None else None,
        model_input_tokens=sum(u.input_tokens for u in state.money.model_usage.values()),
        model_output_tokens=sum(u.output_tokens for u in state.money.model_usage.values()),
        refused=state.kit.request_refused,
    )


def question_text(request: AskRequest) -> str:
    """The question as a notification says it."""
    if request.choices:
        return f"{request.question} (answer one of: {', '.join(request.choices)})"
    return request.question
