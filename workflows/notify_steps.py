"""AgentRun's notifications: each state change a person may need to hear of, told once.

Once per state change: the change is numbered in the workflow's state before anything is
sent, the first try is one activity (commands in history, so a replay or another worker after
a SIGKILL never sends it again), and the targets it did not reach are handed to an
`OvernightNotify` workflow whose id is that number (`notify:{run_id}:{n}`), which outlives the
run. Never in the run's way: the first try runs beside the loop (awaited only before the run
ends or continues as new, so it is not lost), and nothing about it can fail the run.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)

with workflow.unsafe.imports_passed_through():
    from activities.notify.models import Notification, NotifyRetry
    from overnight.core.notify_spec import NotifyEvent
    from workflows.calls import notify
    from workflows.pure.notifications import notification
    from workflows.pure.state import SupervisorState

NOTIFY_WORKFLOW = "OvernightNotify"
# A retry for every target of the notification (which ones were reached is not known).
EVERY_TARGET = "*"
# The error type of an activity the worker does not have (temporalio's).
NOT_REGISTERED = "NotFoundError"
_SUMMARIES: dict[str, str] = {
    "needs_attention": "needs attention",
    "failed": "failed",
    "finished": "finished",
    "cancelled": "cancelled",
    "restart": "restart",
    "waiting_for_answer": "question for a person",
}


def notify_workflow_id(run_id: str, number: int) -> str:
    return f"notify:{run_id}:{number}"


class Notifier:
    def __init__(self) -> None:
        self._sending: list[asyncio.Task[None]] = []

    def tell(self, s: SupervisorState, event: NotifyEvent, reason: str) -> None:
        """Start telling of a state change; returns at once."""
        if not s.notifying:
            return
        s.notifications_sent += 1
        note = notification(s, event, reason, workflow.now())
        self._sending = [task for task in self._sending if not task.done()]
        self._sending.append(asyncio.create_task(self._send(note, s.notifications_sent)))

    async def settle(self) -> None:
        """Wait for the first tries under way (each bounded by its timeout)."""
        sending, self._sending = self._sending, []
        if sending:
            await asyncio.gather(*sending)

    async def _send(self, note: Notification, number: int) -> None:
        what = _SUMMARIES[note.event]
        try:
            sent = await notify.send_first_try(note, what)
            left = sent.undelivered
        except ActivityError as err:
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type == NOT_REGISTERED:
                # No worker here sends notifications (a test or benchmark worker without
                # them): nothing to hand on.
                workflow.logger.warning("notification %s: no worker sends it", note.event_id)
                return
            workflow.logger.warning("notification %s: first try failed: %s", note.event_id, err)
            left = [EVERY_TARGET]  # the activity did not say which it reached
        if not left:
            return
        try:
            await workflow.start_child_workflow(
                NOTIFY_WORKFLOW,
                NotifyRetry(notification=note, targets=left),
                id=notify_workflow_id(note.run_id, number),
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                static_summary=f"deliver {what} notification of {note.run_id}",
            )
        except (ChildWorkflowError, WorkflowAlreadyStartedError) as err:
            workflow.logger.warning("notification %s: no retry workflow: %s", note.event_id, err)
