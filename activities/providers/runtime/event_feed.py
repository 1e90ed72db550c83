"""The account's events, read by one loop per worker process and handed to each run's watch.

Runtime lists every event of the account (`GET /v1/events`, newest first, kept 14 days): a
sandbox's lifecycle (`sandbox.paused`, `sandbox.stopped`, ...) and, from a file watch started
with `webhook: true`, `sandbox.files.changed` with what changed (Runtime reads such a watch
itself, without waking the sandbox). One `EventFeed` per client (so per worker process and
event loop) asks for the newest page every `interval` seconds, a short request that holds
nothing open, and hands each new event to the watches waiting on its sandbox. So a worker's
requests for watching are one per `interval` however many runs it watches.

The feed keeps the last events of every sandbox for a while, so a run's next observe (after a
durable timer, or on this worker after another) carries on from its token's mark (the
`createdAt` of the last event it took, in ms) with nothing missed; a mark older than what the
feed holds is caught up with one request for that sandbox's events (`resourceId=`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import withruntime

PAGE = 100
# At most this many pages a look (a flood beyond them is caught up per sandbox, by its mark).
MOST_PAGES = 20
# Events kept per sandbox (only what a watch reads of each), and for how long after its last
# one (for observes that come later).
KEPT_PER_SANDBOX = 32
KEPT_SECONDS = 1800.0
# With nobody watching through it for this long, the feed stops asking.
IDLE_STOP_SECONDS = 120.0
# A failed look is tried again after this (the SDK has already retried it).
FAILED_PAUSE_SECONDS = 2.0
# A feed that starts reads this far back, so the marks of runs watched a moment ago (on this
# worker, or another) are covered without asking per sandbox.
BACKFILL_MS = 60_000
# At most this many per-sandbox catch-ups at once (after a worker's restart, its runs' marks
# are older than its feed): paced, so they never burst past the key's rate.
CATCH_UPS_AT_ONCE = 2


def event_ms(event: dict[str, Any]) -> int:
    """An event's `createdAt` in ms since the epoch (0 when it has none)."""
    text = event.get("createdAt")
    if not isinstance(text, str):
        return 0
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


def _compact(event: dict[str, Any], sandbox_id: str) -> dict[str, Any]:
    """What a watch needs of an event (a thousand sandboxes' last events stay small)."""
    found = event.get("data")
    data: dict[str, Any] = found if isinstance(found, dict) else {}
    kept: dict[str, Any] = {"sandbox": {"id": sandbox_id}}
    changes = data.get("events")
    if isinstance(changes, list):
        kept["events"] = [
            {k: c[k] for k in ("type", "path", "oldPath") if k in c}
            for c in changes
            if isinstance(c, dict)
        ]
    for name in ("more", "overflow", "ended"):
        if data.get(name):
            kept[name] = data[name]
    return {k: event.get(k) for k in ("id", "type", "createdAt")} | {"data": kept}


def sandbox_of(event: dict[str, Any]) -> str | None:
    data = event.get("data")
    sandbox = data.get("sandbox") if isinstance(data, dict) else None
    found = sandbox.get("id") if isinstance(sandbox, dict) else None
    return found if isinstance(found, str) else None


@dataclass
class _Kept:
    events: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=KEPT_PER_SANDBOX))
    # Events older than this mark were dropped from `events` (the deque was full).
    dropped_up_to: int = -1
    touched: float = field(default_factory=time.monotonic)


class EventFeed:
    """One loop reading the account's events for every watch of this client."""

    def __init__(self, client: Callable[[], withruntime.AsyncRuntime], interval: float) -> None:
        self._client = client
        self.interval = interval
        self._queues: dict[str, set[asyncio.Queue[dict[str, Any]]]] = {}
        self._kept: dict[str, _Kept] = {}
        self._task: asyncio.Task[None] | None = None
        # Every event after this mark (ms) has been seen; None: not started.
        self.covered_from: int | None = None
        self._newest_ms = -1
        self._newest_ids: set[str] = set()
        # The newest event of a sandbox whose kept events were forgotten.
        self._forgotten_ms = -1
        self._idle_since = time.monotonic()
        self._started = asyncio.Event()
        self._catch_ups = asyncio.Semaphore(CATCH_UPS_AT_ONCE)
        self.looks = 0
        self.catch_ups = 0

    # --- for watches ---

    @contextlib.asynccontextmanager
    async def subscribe(self, sandbox_id: str) -> AsyncIterator[asyncio.Queue[dict[str, Any]]]:
        """A queue of this sandbox's events from now on (the feed runs while anyone listens)."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._queues.setdefault(sandbox_id, set()).add(queue)
        self._ensure_running()
        try:
            await self._started.wait()
            yield queue
        finally:
            queues = self._queues.get(sandbox_id)
            if queues is not None:
                queues.discard(queue)
                if not queues:
                    del self._queues[sandbox_id]
            self._idle_since = time.monotonic()

    def since(self, sandbox_id: str, mark: int) -> list[dict[str, Any]] | None:
        """The sandbox's events after `mark` (ms), oldest first; None when the feed cannot say
        (it started after the mark, or dropped some of them)."""
        if self.covered_from is None or mark < self.covered_from:
            return None
        kept = self._kept.get(sandbox_id)
        if kept is None:
            return None if mark < self._forgotten_ms else []
        if kept.dropped_up_to >= mark:
            return None
        return [e for e in kept.events if event_ms(e) > mark]

    def mark_now(self) -> int:
        """A mark up to which every event has been handed over."""
        return max(self._newest_ms, self.covered_from or -1)

    async def catch_up(self, sandbox_id: str, mark: int) -> list[dict[str, Any]]:
        """One sandbox's events after `mark`, asked of Runtime (oldest first)."""
        async with self._catch_ups:
            self.catch_ups += 1
            return await self._catch_up(sandbox_id, mark)

    async def _catch_up(self, sandbox_id: str, mark: int) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MOST_PAGES):
            page = await self._client().events.list(
                resource_id=sandbox_id, cursor=cursor, limit=PAGE
            )
            data = [e for e in page.get("data") or [] if isinstance(e, dict)]
            newer = [e for e in data if event_ms(e) > mark]
            found += newer
            cursor = page.get("nextCursor")
            if len(newer) < len(data) or not cursor:
                break
        found.reverse()
        return found

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # --- the loop ---

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._started = asyncio.Event()
            self.covered_from = None
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            while self._queues or time.monotonic() - self._idle_since < IDLE_STOP_SECONDS:
                began = time.monotonic()
                try:
                    await self._look()
                except (withruntime.RuntimeError, OSError, ValueError):
                    # Watches go on meanwhile: not covered, each asks for its own events (and
                    # meets the failure itself, which its activity's retry policy absorbs).
                    self._started.set()
                    await asyncio.sleep(FAILED_PAUSE_SECONDS)
                    continue
                self._started.set()
                self._forget_old()
                await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - began)))
        finally:
            self.covered_from = None  # stopped: it no longer says where things stand
            self._started.set()

    async def _look(self) -> None:
        """Read the newest events down to the ones already seen; hand over the new ones."""
        self.looks += 1
        first = self.covered_from is None
        fresh: list[dict[str, Any]] = []
        cursor: str | None = None
        back_to: int | None = None
        for _ in range(MOST_PAGES):
            page = await self._client().events.list(cursor=cursor, limit=PAGE)
            data = [e for e in page.get("data") or [] if isinstance(e, dict)]
            new = [e for e in data if self._is_new(e)]
            if first and data:
                # The first look reads BACKFILL_MS back: kept, for marks from before it.
                back_to = back_to or event_ms(data[0]) - BACKFILL_MS
                new = [e for e in new if event_ms(e) > back_to]
            fresh += new
            cursor = page.get("nextCursor")
            if len(new) < len(data) or not cursor:
                break
        fresh.reverse()
        if first:
            # Covered from the oldest event read (all of them, if the account has no more).
            oldest = event_ms(fresh[0]) if fresh else -1
            self.covered_from = -1 if not cursor else max(oldest, back_to or -1)
        self._advance(fresh)
        for event in fresh:
            self._hand_over(event)

    def _is_new(self, event: dict[str, Any]) -> bool:
        at = event_ms(event)
        if at != self._newest_ms:
            return at > self._newest_ms
        return str(event.get("id")) not in self._newest_ids

    def _advance(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            at = event_ms(event)
            if at > self._newest_ms:
                self._newest_ms, self._newest_ids = at, set()
            if at == self._newest_ms:
                self._newest_ids.add(str(event.get("id")))

    def _hand_over(self, event: dict[str, Any]) -> None:
        sandbox_id = sandbox_of(event)
        if sandbox_id is None:
            return
        event = _compact(event, sandbox_id)
        kept = self._kept.setdefault(sandbox_id, _Kept())
        if len(kept.events) == kept.events.maxlen:
            kept.dropped_up_to = event_ms(kept.events[0])
        kept.events.append(event)
        kept.touched = time.monotonic()
        for queue in self._queues.get(sandbox_id, ()):
            queue.put_nowait(event)

    def _forget_old(self) -> None:
        old = time.monotonic() - KEPT_SECONDS
        for sandbox_id in [s for s, kept in self._kept.items() if kept.touched < old]:
            kept = self._kept.pop(sandbox_id)
            if kept.events:
                self._forgotten_ms = max(self._forgotten_ms, event_ms(kept.events[-1]))
