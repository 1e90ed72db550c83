"""`watch` for providers whose looks are cheap (local files, in-memory fakes): look, compare a
stamp of the checkpoint (size and modification time, or a version), sleep, look again.

A look never hashes or reads the checkpoint; only a changed stamp makes the caller read it.
A look that stamps the agent kit's requests file too (`Look.requests_stamp`) keeps both stamps
in the token (`<checkpoint's>|<requests file's>`) and says which changed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from activities.models import SandboxInfo
from activities.providers.protocol import ProcessInfo, Sighting

# How often a local agent is looked at: a crash is noticed within this (each look is a few
# stat calls, see activities.providers.local.agent_looks).
LOOK_INTERVAL_SECONDS = 0.5


@dataclass(frozen=True)
class Look:
    sandbox: SandboxInfo
    process: ProcessInfo
    # What the checkpoint looks like now, without reading it ("missing" when absent).
    stamp: str
    # The same of the kit's requests file, when it is watched (None: it is not).
    requests_stamp: str | None = None

    @property
    def token(self) -> str:
        """Where a watch stands after this look (the checkpoint's stamp, alone when the
        requests file is not watched, so tokens of before read the same)."""
        if self.requests_stamp is None:
            return self.stamp
        return f"{self.stamp}|{self.requests_stamp}"


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
            return last_sighting(seen, token)
        await asyncio.sleep(min(interval, left))


def news_in(seen: Look, token: str | None, *, report_touch: bool) -> Sighting | None:
    """The sighting a watch ends with after this look, or None when there is no news: the
    agent or its sandbox ended, or (with `report_touch`) a stamp changed."""
    touched, asked = touches(seen, token)
    ended = seen.sandbox.state not in ("running", "starting")
    if ((touched or asked) and report_touch) or ended or seen.process.state != "running":
        return Sighting(seen.sandbox, seen.process, touched, seen.token, asked)
    return None


def last_sighting(seen: Look, token: str | None) -> Sighting:
    """The sighting a watch ends with when its time is up: what changed since `token` is said
    (a caller that passed `report_touch=False` may know of one file's change, not the other's)."""
    touched, asked = touches(seen, token)
    return Sighting(seen.sandbox, seen.process, touched, seen.token, asked)


def touches(seen: Look, token: str | None) -> tuple[bool, bool]:
    """Whether the checkpoint's stamp, and the requests file's, differ from `token`'s (None:
    not known, so both count as touched)."""
    stamp, _, requests_stamp = (token or "").partition("|")
    touched = token is None or seen.stamp != stamp
    asked = seen.requests_stamp is not None and (
        token is None or seen.requests_stamp != requests_stamp
    )
    return touched, asked
