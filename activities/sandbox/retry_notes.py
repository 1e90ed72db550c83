"""The create activity tells its run of a failed try that another will follow
(overnight/core/retry_note.py: what the card shows while the run waits). Best effort: a note that
cannot be sent within a few seconds is dropped, never a reason for the try to fail otherwise.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from overnight.core.retry_note import MESSAGE_CHARS, RETRY_NOTE_SIGNAL, RetryNote, next_try_delay

SEND_TIMEOUT_SECONDS = 5
# A try ended by its worker's shutdown is handed over, not failed (activities.heartbeat).
SHUTDOWN = "WorkerShutdown"
logger = logging.getLogger(__name__)


async def tell_run(
    client: Client | None, error: Exception, what: str, sandbox_attempt: int
) -> None:
    """Signal the run a `RetryNote` for `error` when Temporal will try again."""
    if client is None or not activity.in_activity():
        return
    note = retry_note(activity.info(), error, what, sandbox_attempt)
    if note is None:
        return
    info = activity.info()
    handle = client.get_workflow_handle(info.workflow_id or "", run_id=info.workflow_run_id)
    try:
        await asyncio.wait_for(handle.signal(RETRY_NOTE_SIGNAL, note), SEND_TIMEOUT_SECONDS)
    except Exception as failed:  # noqa: BLE001 - best effort: the try fails as it would anyway
        logger.info("could not tell run %s of a failed try: %s", info.workflow_id, failed)


def retry_note(
    info: activity.Info, error: Exception, what: str, sandbox_attempt: int
) -> RetryNote | None:
    """The note for a failed try, or None when no try follows it."""
    policy = info.retry_policy
    if policy is None or info.is_local or not info.workflow_id:
        return None
    if isinstance(error, ApplicationError):
        if error.non_retryable or error.type in (
            *(policy.non_retryable_error_types or ()),
            SHUTDOWN,
        ):
            return None
        first = (error.message or "").strip().splitlines()
    else:
        first = str(error).strip().splitlines()
    if policy.maximum_attempts and info.attempt >= policy.maximum_attempts:
        return None
    delay = next_try_delay(
        info.attempt, policy.initial_interval, policy.backoff_coefficient, policy.maximum_interval
    )
    return RetryNote(
        activity=what,
        sandbox_attempt=sandbox_attempt,
        next_try=info.attempt + 1,
        max_tries=policy.maximum_attempts,
        message=(first[0] if first else type(error).__name__)[:MESSAGE_CHARS],
        next_at=datetime.now(UTC) + (delay or timedelta()),
    )
