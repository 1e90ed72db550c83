"""Heartbeats for long activity steps: only as many as the heartbeat timeout needs, and a
graceful worker shutdown handing the step to another worker at once.

A heartbeat that reaches the server is a billable action, and ours carry nothing (no
details): its only use is to tell Temporal the worker still lives. So a step inside
`auto_heartbeat()` sends none at its start and then one every `heartbeat_interval()`:
`HEARTBEAT_SHARE` (0.8) of its heartbeat timeout, which is also the SDK's own throttle window
(`min(0.8 x timeout, max_heartbeat_throttle_interval)`), so each call is one request, sent when
made. A SIGKILLed worker is noticed when the heartbeat timeout passes; the step is then retried
on another worker.

A worker shut down gracefully (SIGTERM, a deploy: `Worker.shutdown()`) does not wait for that:
- `hand_over_on_shutdown(...)` (the observe long poll) ends the step the moment shutdown
  begins, with a retryable `WorkerShutdown` error retried after `HANDOVER_RETRY_DELAY`, so
  another worker carries it on within seconds; the attempt leaves nothing in the history.
- any other step inside `auto_heartbeat()` gets the worker's graceful shutdown period to finish;
  if the SDK cancels it at that period's end, it fails the same way (steps are idempotent).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import ParamSpec, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from activities.errors import ErrorType

T = TypeVar("T")
P = ParamSpec("P")

# Heartbeat this share of the heartbeat timeout after the last one: the SDK's throttle window.
HEARTBEAT_SHARE = 0.8
# A step handed over at a worker's shutdown is retried this soon (whatever its retry backoff).
HANDOVER_RETRY_DELAY = timedelta(seconds=1)


def heartbeat_interval(default: float | None = None) -> float | None:
    """`HEARTBEAT_SHARE` of the activity's heartbeat timeout; `default` (None: never) when
    it has none or this is not an activity."""
    if not activity.in_activity():
        return default
    timeout = activity.info().heartbeat_timeout
    if timeout is None:
        return default
    return max(0.05, timeout.total_seconds() * HEARTBEAT_SHARE)


def handed_over(what: str) -> ApplicationError:
    return ApplicationError(
        f"worker shutting down: {what} handed to another worker",
        type=ErrorType.WORKER_SHUTDOWN,
        next_retry_delay=HANDOVER_RETRY_DELAY,
        # Expected in every deploy: the SDK logs it at DEBUG, not as a failure with a traceback.
        category=ApplicationErrorCategory.BENIGN,
    )


def _cancelled_by_shutdown() -> bool:
    details = activity.cancellation_details()
    return details is not None and details.worker_shutdown


@asynccontextmanager
async def auto_heartbeat(interval: float | None = None) -> AsyncIterator[None]:
    """Heartbeat every `interval` seconds (default: `heartbeat_interval()`) inside the block,
    the first one only after `interval`; a cancellation by the worker's shutdown becomes a
    retryable `WorkerShutdown` failure."""
    if not activity.in_activity():
        yield
        return
    every = interval if interval is not None else heartbeat_interval()

    async def beat(every: float) -> None:
        while True:
            await asyncio.sleep(every)
            activity.heartbeat()

    task = asyncio.create_task(beat(every)) if every is not None else None
    try:
        yield
    except asyncio.CancelledError:
        if _cancelled_by_shutdown():
            raise handed_over(activity.info().activity_type) from None
        raise
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def heartbeating(step: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """The activity `step`, all of it inside `auto_heartbeat()` (put under `activity.defn`)."""

    @functools.wraps(step)
    async def beating(*args: P.args, **kwargs: P.kwargs) -> T:
        async with auto_heartbeat():
            return await step(*args, **kwargs)

    return beating


async def hand_over_on_shutdown(step: Awaitable[T], what: str) -> T:
    """Run `step` until it ends or the worker begins to shut down; then end it and raise a
    retryable `WorkerShutdown` error, so Temporal retries the activity on another worker."""
    if not activity.in_activity():
        return await step
    work = asyncio.ensure_future(step)
    shutdown = asyncio.create_task(activity.wait_for_worker_shutdown())
    try:
        await asyncio.wait({work, shutdown}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (work, shutdown):
            if not task.done():
                task.cancel()
        await asyncio.gather(work, shutdown, return_exceptions=True)
    if work.cancelled():  # the shutdown came first (a cancellation from outside raised above)
        raise handed_over(what)
    return work.result()
