"""`watch` for providers whose looks are cheap (local files, in-memory fakes): look, compare a
stamp of the checkpoint (size and modification time, or a version), sleep, look again.

A look never hashes or reads the checkpoint; only a changed stamp makes the caller read it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from activities.models import SandboxInfo
from activities.providers.protocol import ProcessInfo, Sighting

# How often a local agent is looked at: a crash is noticed within this (each look is a few
# stat calls, see activities.providers.local.look).
LOOK_INTERVAL_SECONDS = 0.5


@dataclass(frozen=True)
class Look:
    sandbox: SandboxInfo
    process: ProcessInfo
    # What the checkpoint looks like now, without reading it ("missing" when absent).
    stamp: str


async def poll_watch(
    look: Callable[[], Awaitable[Look]],
    *,
    token: str | None,
    wait_seconds: float,
    interval: float = LOOK_INTERVAL_SECONDS,
    report_touch: bool = True,
) -> Sighting:
    """Look every `interval` until something differs from `token` (the stamp of the last
    look; None: not known, so the checkpoint counts as touched) or `wait_seconds` pass.
    Without `report_touch`, a changed stamp alone does not end the wait."""
    give_up = time.monotonic() + wait_seconds
    while True:
        seen = await look()
        news = news_in(seen, token, report_touch=report_touch)
        if news is not None:
            return news
        left = give_up - time.monotonic()
        if left <= 0:
            return Sighting(seen.sandbox, seen.process, False, seen.stamp)
        await asyncio.sleep(min(interval, left))


def news_in(seen: Look, token: str | None, *, report_touch: bool) -> Sighting | None:
    """The sighting a watch ends with after this look, or None when there is no news: the
    agent or its sandbox ended, or (with `report_touch`) the checkpoint's stamp changed."""
    touched = seen.stamp != token
    ended = seen.sandbox.state not in ("running", "starting")
    if (touched and report_touch) or ended or seen.process.state != "running":
        return Sighting(seen.sandbox, seen.process, touched, seen.stamp)
    return None
