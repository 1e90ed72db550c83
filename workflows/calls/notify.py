"""Telling a run's webhooks (activities/notify/): the run's first try at every target, and the
`OvernightNotify` workflow's tries at each one left. Failures are raised: the callers decide."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import ActivityName
    from activities.notify.models import DeliveryInput, Notification, SendResult
    from workflows import policies


async def send_first_try(note: Notification, what: str) -> SendResult:
    """The run's one try at every target (its retry policy is short: the rest is handed on)."""
    sent: SendResult = await workflow.execute_activity(
        ActivityName.SEND_NOTIFICATION,
        note,
        result_type=SendResult,
        **policies.NOTIFY.options(),
        summary=f"notify: {what} ({note.event_id})",
    )
    return sent


async def send_again(note: Notification) -> SendResult:
    """Every target again, retried until the delivery deadline (the first try said nothing)."""
    sent: SendResult = await workflow.execute_activity(
        ActivityName.SEND_NOTIFICATION,
        note,
        result_type=SendResult,
        **policies.NOTIFY_AGAIN.options(),
        summary=f"notify {note.event_id}: every target",
    )
    return sent


async def deliver(note: Notification, target: str) -> None:
    """One target, retried until the delivery deadline."""
    await workflow.execute_activity(
        ActivityName.DELIVER_NOTIFICATION,
        DeliveryInput(notification=note, target=target),
        **policies.DELIVERY.options(),
        summary=f"notify {note.event_id}: {target}",
    )
