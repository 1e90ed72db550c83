"""`OvernightNotify`: keeps trying the targets a run's notification did not reach at first.

Started by AgentRun (workflows.notify_steps) with a parent-close policy of ABANDON, so it
goes on after the run has ended: a receiver that was down when the run finished still hears
of it once it is back. Each target is one activity with its own retry policy (backoff growing
to 10 minutes, for up to a day); a receiver that refuses (4xx) is not tried again. The run
never waits for it.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.notify.models import NotifyRetry, SendResult
    from workflows.calls import notify
    from workflows.notify_steps import EVERY_TARGET, NOTIFY_WORKFLOW


@workflow.defn(name=NOTIFY_WORKFLOW)
class NotifyRun:
    @workflow.run
    async def run(self, retry: NotifyRetry) -> SendResult:
        note = retry.notification
        targets = list(retry.targets)
        done = SendResult()
        if EVERY_TARGET in targets:
            # The run's first try said nothing: try them all again, then each one left.
            done = await notify.send_again(note)
            targets = list(done.undelivered)
            done = SendResult(delivered=done.delivered, refused=done.refused)
        outcomes = await asyncio.gather(*(self._deliver(retry, t) for t in targets))
        for target, outcome in zip(targets, outcomes, strict=True):
            if outcome is None:
                done.delivered.append(target)
            else:
                done.undelivered.append(target)
                workflow.logger.warning("%s to %s: %s", note.event_id, target, outcome)
        if done.undelivered:
            raise ApplicationError(
                f"notification {note.event_id} not delivered to {', '.join(done.undelivered)}",
                type="NotDelivered",
                non_retryable=True,
            )
        return done

    async def _deliver(self, retry: NotifyRetry, target: str) -> str | None:
        """None when delivered; else why not."""
        try:
            await notify.deliver(retry.notification, target)
        except ActivityError as err:
            cause = err.cause
            return str(cause) if cause is not None else str(err)
        return None
