"""AgentRun's messages: the `cancel` and `extend_budget` signals, the `extend_budget` update
and the `status` query. They only change or read the run's state; the loop (`agent_run`)
notices the change.

Workflow code: `AgentRun` inherits these handlers (Temporal collects them from base classes).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from overnight.core.admission import ADMITTED_SIGNAL, IN_POOL_QUERY
    from overnight.core.agent_requests import choice_refusal
    from overnight.core.models import Budget, BudgetExtension, RunStatus
    from overnight.core.retry_note import RETRY_NOTE_SIGNAL, RetryNote
    from workflows.pure import budget, delivery, kit_requests, workspace
    from workflows.pure.card import build_status
    from workflows.pure.state import SupervisorState


CHECKPOINT_QUERY = "checkpoint"


class RunMessages:
    """What people (and other code) say to a run while it goes on."""

    def __init__(self) -> None:
        self._s: SupervisorState | None = None
        # Set by an extension; a run waiting for a person wakes on it (`attention_steps`).
        self.budget_changed = False

    # Signal handlers take any arguments: a payload of the wrong type or an extra argument
    # must never fail the workflow task (a signal that cannot be applied is only logged).
    @workflow.signal(name="cancel")
    def cancel(self, reason: Any = None, *_extra: Any) -> None:
        if self._s is None or self._s.cancel_requested:
            return
        self._s.cancel_requested = True
        self._s.cancel_reason = reason if isinstance(reason, str) else None

    # From the pool's admission workflow: the run, queued, may start (workflows/admission_steps).
    @workflow.signal(name=ADMITTED_SIGNAL)
    def admitted_signal(self, *_args: Any) -> None:
        if (
            self._s is not None
            and self._s.pool.admission is not None
            and not self._s.pool.stepped_out
        ):
            self._s.pool.admitted = True

    # Asked by the pool's admission workflow before it frees a place on a `release` signal,
    # which anyone may send naming any run: only a run that is in no pool has its place freed.
    @workflow.query(name=IN_POOL_QUERY)
    def in_pool(self) -> bool:
        s = self._s
        return s is not None and s.pool.admission is not None and not s.pool.stepped_out

    # From the create activity: a try failed and another follows (overnight/core/retry_note.py); the
    # create step shows it on the card. Runs begun before fail-fast ignore it, as do late ones.
    @workflow.signal(name=RETRY_NOTE_SIGNAL)
    def activity_retrying(self, note: Any = None, *_extra: Any) -> None:
        s = self._s
        if s is None or not s.fail_fast or s.state not in ("starting", "restarting"):
            return
        try:
            parsed = RetryNote.model_validate(note)
        except ValidationError:
            return
        if parsed.sandbox_attempt == s.attempt:
            s.waiting_on = parsed

    @workflow.signal(name="extend_budget")
    def extend_budget(self, extension: Any = None, *extra: Any) -> None:
        if extra:
            workflow.logger.warning("ignoring an extend_budget signal with %d args", 1 + len(extra))
            return
        try:
            parsed = BudgetExtension.model_validate(extension)
        except ValidationError as err:
            workflow.logger.warning("ignoring a bad extend_budget signal: %s", _first_error(err))
            return
        self._apply_extension(parsed)

    # The same name as the signal: an update also answers with the new budget, and its
    # validator refuses a bad extension before it enters history.
    @workflow.update(name="extend_budget")
    def extend_budget_update(self, extension: BudgetExtension) -> Budget:
        self._apply_extension(extension)
        assert self._s is not None
        return self._s.budget

    @extend_budget_update.validator
    def _validate_extend_budget(self, extension: BudgetExtension) -> None:
        if self._s is None:
            raise ValueError("the run has not started yet")
        if self._s.state in ("finished", "cancelled", "failed"):
            raise ValueError(f"the run is already {self._s.state}")
        if extension.is_empty():
            raise ValueError("the extension adds nothing")

    # The answer to the agent's question (the kit's `ask()`): a plain text argument, so the
    # stock `temporal workflow update execute --name answer --input '"yes"'` works too.
    @workflow.update(name="answer")
    def answer(self, text: Any) -> str:
        assert self._s is not None and self._s.kit.question is not None
        kit_requests.record_answer(self._s, text)
        return f"answered {self._s.kit.question.id}"

    @answer.validator
    def _validate_answer(self, text: Any) -> None:
        s = self._s
        if s is None or s.kit.question is None or s.kit.answer_given is not None:
            raise ValueError("no question is waiting for an answer")
        if not isinstance(text, str):
            raise ValueError("the answer must be text")
        refusal = choice_refusal(s.kit.question, text)
        if refusal is not None:
            raise ValueError(refusal)

    # `overnight push`: try again now what the run waits on to deliver its work (its push, a
    # kept workspace's, its pull request, a look at its CI), as any extension does, without
    # adding to the budget. Refused by its validator when it waits on none of them.
    @workflow.update(name="push_again")
    def push_again(self) -> str:
        self.budget_changed = True
        return "trying again now"

    @push_again.validator
    def _validate_push_again(self) -> None:
        s = self._s
        if s is None:
            raise ValueError("the run has not started yet")
        waits = s.state == "needs_attention" and (delivery.waiting(s) or workspace.held(s))
        if not waits:
            raise ValueError(f"nothing waits to be pushed: the run is {s.state.replace('_', ' ')}")

    # The last good checkpoint's text (None: none yet), for the console's run page, which shows
    # its notes. A query records nothing: histories replay as before.
    @workflow.query(name=CHECKPOINT_QUERY)
    def checkpoint_text(self) -> str | None:
        return self._s.progress.checkpoint if self._s is not None else None

    @workflow.query(name="status")
    def status(self) -> RunStatus:
        if self._s is None:
            raise ApplicationError("the run has not started yet")
        return build_status(self._s, workflow.now())

    def _apply_extension(self, extension: BudgetExtension) -> None:
        if self._s is None or extension.is_empty():
            return
        self._s.budget = budget.extended(self._s.budget, extension)
        self.budget_changed = True
        workflow.logger.info("budget extended to %s", self._s.budget)


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "payload"
    return f"{where}: {first.get('msg', 'invalid')}"
