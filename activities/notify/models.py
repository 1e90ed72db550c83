"""The models of the notification activities and the `OvernightNotify` workflow.

A `Notification` is built by the workflow from its state (deterministic, no secrets: output
tails in it are already redacted) and rendered, signed and posted by the worker, which alone
knows the URLs kept in its environment, the signing secrets and the Web UI's address.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from overnight.core.agent_requests import RunOutputs
from overnight.core.models import Budget, RunState
from overnight.core.notify_spec import NotifyEvent, Webhook


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BudgetLeft(_Model):
    restarts: int
    hours: float
    # None: the run has no spend cap.
    spend_usd: float | None = None


class Notification(_Model):
    # `{run_id}-{n}`: the n-th state change the run told of; the same on every retry, so a
    # receiver can drop a repeat (header `Idempotency-Key`).
    event_id: str
    event: NotifyEvent
    run_id: str
    state: RunState
    reason: str
    at: datetime
    attempt: int
    restarts_used: int
    budget: Budget
    budget_left: BudgetLeft
    hours_used: float
    spend_usd: float
    next_step: str | None = None
    # The last words of the agent that ended most recently (redacted), and which attempt.
    output_tail: str | None = None
    output_attempt: int | None = None
    # What the agent handed over with the kit's `finish()` (finished runs).
    outputs: RunOutputs | None = None
    # The commit the run's branch on the origin holds, and its pull request (finished runs).
    pushed_commit: str | None = None
    pull_request_url: str | None = None
    # Where to send (besides the worker's default) and what to redact (names only).
    webhooks: list[Webhook] = Field(default_factory=list)
    secret_env: list[str] = Field(default_factory=list)


class SendResult(_Model):
    """How the first try went: targets are named by key (`spec-<i>`, `worker-<j>`)."""

    delivered: list[str] = Field(default_factory=list)
    # Failed in a way a later try may fix (receiver down, 5xx, timeout, URL variable unset).
    undelivered: list[str] = Field(default_factory=list)
    # Refused for good (4xx): not tried again.
    refused: list[str] = Field(default_factory=list)


class DeliveryInput(_Model):
    """One more try for one target (the `OvernightNotify` workflow's activity)."""

    notification: Notification
    target: str


class NotifyRetry(_Model):
    """What `OvernightNotify` keeps trying: a notification, to the targets not reached yet."""

    notification: Notification
    targets: list[str]
