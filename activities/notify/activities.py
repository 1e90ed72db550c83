"""The notification activities, registered by the worker (`WorkerActivities.all`).

`send_notification`: the first try at a state change, to every target at once; it never
raises for a receiver (the run must not care), it says which targets it did not reach.
`deliver_notification`: one target once more (from the `OvernightNotify` workflow); it raises
so that the workflow's retry policy tries again, or `WebhookRefused` when it is pointless.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from activities.admission.grants import worker_grants
from activities.models import ActivityName
from activities.notify import send as notify
from activities.notify.models import DeliveryInput, Notification, SendResult
from overnight.core.connect import UI_URL_ENV, default_ui_base, web_ui_url
from overnight.core.grants import Grants

logger = logging.getLogger(__name__)


class NotifyActivities:
    def __init__(
        self,
        client: Client | None,
        environ: Mapping[str, str] | None = None,
        *,
        grants: Grants | None = None,
    ) -> None:
        """`environ`: the worker's variables (URLs, secrets); `grants`: the secret names a
        webhook may sign with (without them: the grants `environ` sets)."""
        self._client = client
        self._environ = environ
        self._grants = worker_grants(environ) if grants is None else grants

    def all(self) -> list[Callable[..., Any]]:
        return [self.send_notification, self.deliver_notification]

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def web_ui(self, run_id: str) -> str | None:
        """The run's page in the Temporal Web UI, as this worker can tell (`OVERNIGHT_UI_URL`
        names the UI's base when it is not the dev server's or Temporal Cloud's)."""
        if self._client is None:
            return None
        address = self._client.service_client.config.target_host
        base = default_ui_base(address, self.environ.get(UI_URL_ENV) or None)
        return web_ui_url(base, self._client.namespace, run_id) if base else None

    @activity.defn(name=ActivityName.SEND_NOTIFICATION)
    async def send_notification(self, note: Notification) -> SendResult:
        environ = self.environ
        found = notify.targets(note, environ, self._grants)
        web_ui = self.web_ui(note.run_id)
        results = await asyncio.gather(
            *(asyncio.to_thread(notify.deliver, t, note, web_ui, environ) for t in found)
        )
        sent = SendResult()
        for target, result in zip(found, results, strict=True):
            if result.ok:
                sent.delivered.append(target.key)
            elif result.retryable:
                sent.undelivered.append(target.key)
            else:
                sent.refused.append(target.key)
            if not result.ok:
                logger.warning(
                    "notification %s not delivered to %s: %s",
                    note.event_id,
                    target.key,
                    result.detail,
                )
        return sent

    @activity.defn(name=ActivityName.DELIVER_NOTIFICATION)
    async def deliver_notification(self, input: DeliveryInput) -> None:
        note = input.notification
        environ = self.environ
        found = notify.targets(note, environ, self._grants)
        target = next((t for t in found if t.key == input.target), None)
        if target is None:
            raise ApplicationError(
                f"no target {input.target} for {note.event_id} here",
                type="WebhookRefused",
                non_retryable=True,
            )
        result = await asyncio.to_thread(
            notify.deliver, target, note, self.web_ui(note.run_id), environ
        )
        if result.ok:
            return
        raise ApplicationError(
            f"{target.key}: {result.detail}",
            type="WebhookUnreachable" if result.retryable else "WebhookRefused",
            non_retryable=not result.retryable,
        )
