"""One run's watch read through the worker's event feed (`activities.providers.runtime.event_feed`)
instead of a held stream: the same news (`watch.WatchNews`), from the account's events.

- `sandbox.files.changed` (Runtime's own read of the run's webhook watch) says what changed in
  the checkpoint's folder: the checkpoint, the kit's requests file, or an agent's exit marker.
  One that says changes were left out (`more`, `overflow`) counts as all of them: the exit is
  then asked of the process.
- `sandbox.paused`, `sandbox.stopped`, `sandbox.start_failed`, `sandbox.wake_failed`, and a
  watch that `ended`: the sandbox no longer runs as watched (the caller asks it how it is).

How fast: an event is listed once Runtime has read the watch (its batch, then at most once a
file-hook window a watch) and the feed has looked (every `interval`); see the Runtime page of
the docs for the measured times.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from activities.providers.runtime.event_feed import EventFeed, event_ms
from activities.providers.runtime.watch_stream import Touches, Watched, WatchNews, note

ENDING = {
    "sandbox.paused": "paused",
    "sandbox.stopped": "stopped",
    "sandbox.start_failed": "stopped",
    "sandbox.wake_failed": "wake_failed",
}


@dataclass
class _Taken:
    watched: Watched
    mark: int
    seen: Touches = field(default_factory=Touches)
    ended: str | None = None

    def take(self, event: dict[str, Any]) -> None:
        self.mark = max(self.mark, event_ms(event))
        kind = event.get("type")
        found = event.get("data")
        data: dict[str, Any] = found if isinstance(found, dict) else {}
        if kind in ENDING:
            self.ended = ENDING[str(kind)]
        elif kind in ("sandbox.woken", "sandbox.running") and self.ended == "paused":
            self.ended = None  # paused and woken again since: it runs
        elif kind == "sandbox.files.changed":
            for change in data.get("events") or []:
                if isinstance(change, dict):
                    note(change, self.watched, self.seen)
            if data.get("more") or data.get("overflow"):
                self.seen.touched = self.seen.exited = True
                self.seen.asked = self.watched.requests is not None
            if data.get("ended"):
                self.ended = f"watch {data['ended']}"

    def decisive(self, report_touch: bool) -> bool:
        return self.ended is not None or self.seen.decisive(report_touch)

    def news(self) -> WatchNews:
        # An exit is asked of the process only after asking the sandbox whether it still runs
        # (a pause may be listed later than the exit): not settled.
        return WatchNews.of(self.seen, self.ended, settled=not self.seen.exited)


async def feed_news(
    feed: EventFeed,
    sandbox_id: str,
    watched: Watched,
    mark: int,
    wait_seconds: float,
    *,
    report_touch: bool,
) -> tuple[WatchNews, int]:
    """The sandbox's events after `mark` until one matters (a write only with `report_touch`)
    or `wait_seconds` pass; the news and the new mark."""
    taken = _Taken(watched, mark)
    async with feed.subscribe(sandbox_id) as queue:
        backlog = feed.since(sandbox_id, mark)
        if backlog is None:
            backlog = await feed.catch_up(sandbox_id, mark)
        for event in backlog:
            taken.take(event)
        give_up = asyncio.get_running_loop().time() + max(0.0, wait_seconds)
        while not taken.decisive(report_touch):
            left = give_up - asyncio.get_running_loop().time()
            if left <= 0:
                break
            try:
                event = await asyncio.wait_for(queue.get(), left)
            except TimeoutError:
                break
            if event_ms(event) > mark:
                taken.take(event)
        # What is already here goes too (nothing handed over is left behind the mark).
        while not queue.empty():
            event = queue.get_nowait()
            if event_ms(event) > mark:
                taken.take(event)
        if not taken.decisive(report_touch):
            taken.mark = max(taken.mark, feed.mark_now())
    return taken.news(), taken.mark
