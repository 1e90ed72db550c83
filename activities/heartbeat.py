"""Heartbeats for long activity steps.

A step that takes more than a few seconds (a clone, a long poll) runs inside
`auto_heartbeat()`: a background task heartbeats while it runs, so the workflow's
`heartbeat_timeout` notices a dead worker quickly and cancellation reaches the activity.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio import activity

DEFAULT_INTERVAL_SECONDS = 5.0


def heartbeat_interval(default: float = DEFAULT_INTERVAL_SECONDS) -> float:
    """A third of the activity's heartbeat timeout, and never more than `default`."""
    if not activity.in_activity():
        return default
    timeout = activity.info().heartbeat_timeout
    if timeout is None:
        return default
    return max(0.05, min(default, timeout.total_seconds() / 3))


@asynccontextmanager
async def auto_heartbeat(interval: float | None = None) -> AsyncIterator[None]:
    """Heartbeat every `interval` seconds (default: `heartbeat_interval()`) inside the block."""
    if not activity.in_activity():
        yield
        return
    every = interval if interval is not None else heartbeat_interval()

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
