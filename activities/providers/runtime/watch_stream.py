"""Watching a Runtime sandbox's agent through one file watch per sandbox.

One file watch per sandbox, on the checkpoint's folder, started with `webhook: true`, so it
can be read two ways (see `activities.providers.runtime.agent_watch` for which one a run gets):
- as a stream held open (`GET …/files/watches/{id}/events?follow=true`): one request per
  ~110 s while nothing happens, news within the watch's batch delay (100 ms), and the stream
  ends with `paused` when the sandbox pauses; or
- through the account's events (`activities.providers.runtime.event_feed`): Runtime reads the watch
  itself into `sandbox.files.changed` events, and one loop per worker reads those for all its
  runs, holding nothing open.
Reading a watch never wakes a paused sandbox. The agent's exit shows up as a file too: the
spawned command is wrapped to write an exit marker (`.overnight-exit-<start key>`) next to the
checkpoint when the agent ends; only then is the process itself asked for its exit code. The
agent kit's requests file lives in the same folder (`.overnight-requests.json`), so the same
watch sees it written, at no request more.

The watch's id, its stream cursor and the mark of the last event taken from the feed travel
between observe activities as an opaque token (`<watch id>@<cursor>~<mark>!<pending>`), so a
new activity, on any worker, carries on with nothing missed.
"""

from __future__ import annotations

import asyncio
import posixpath
import shlex
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import withruntime
from withruntime._async_products.watch import AsyncWatchHandle

EXIT_MARKER_PREFIX = ".overnight-exit-"
# A batch of file events a little after they happen: a crash is seen this fast.
WATCH_BATCH_MS = 100
# After news, the stream is read on until it is quiet this long (a pause would follow at once).
SETTLE_SECONDS = 0.3
SETTLE_MAX_SECONDS = 2.0
# Shorter waits read what is pending in one long poll instead of opening a stream.
STREAM_AT_LEAST_SECONDS = 2.0


def exit_marker_path(checkpoint_path: str, start_key: str) -> str:
    return posixpath.join(posixpath.dirname(checkpoint_path), EXIT_MARKER_PREFIX + start_key)


def wrap_with_exit_marker(command: str, marker: str) -> str:
    """The agent's command in a subshell, followed by writing its exit code to `marker`
    (atomically, so the watch sees one finished file). The exit code is passed on unchanged."""
    m = shlex.quote(marker)
    return (
        f"(\n{command}\n)\n"
        "overnight_code=$?\n"
        f"printf '%s\\n' \"$overnight_code\" > {m}.tmp && mv -f {m}.tmp {m}\n"
        'exit "$overnight_code"\n'
    )


@dataclass(frozen=True)
class Watched:
    """The files of the checkpoint's folder a watch looks for: the checkpoint, and the kit's
    requests file beside it (None: not watched, runs begun before it)."""

    checkpoint: str
    requests: str | None = None


@dataclass
class Touches:
    """What the events of a stretch of the watch said so far."""

    touched: bool = False  # the checkpoint was written
    asked: bool = False  # the requests file was written
    exited: bool = False  # an agent's exit marker appeared

    def decisive(self, report_touch: bool) -> bool:
        return self.exited or ((self.touched or self.asked) and report_touch)


@dataclass(frozen=True)
class WatchToken:
    """Where a watch stands. `pending` carries news read just before the sandbox paused, to be
    acted on once it runs again (asking now would wake it): "x" an agent exited, "t" the
    checkpoint was written, "r" the requests file was."""

    watch_id: str
    cursor: int
    pending: str = ""
    # The feed's mark (ms): events up to it were taken. None: never read through the feed.
    mark: int | None = None
    # An exit marker appeared but the agent's process was still reported running: it is asked
    # again at the start of this many more reads (the marker's news is already taken).
    unconfirmed: int = 0

    def encode(self) -> str:
        mark = "" if self.mark is None else f"~{self.mark}"
        unconfirmed = f"?{self.unconfirmed}" if self.unconfirmed else ""
        pending = f"!{self.pending}" if self.pending else ""
        return f"{self.watch_id}@{self.cursor}{mark}{unconfirmed}{pending}"

    @classmethod
    def decode(cls, token: str | None) -> WatchToken | None:
        if not token or "@" not in token:
            return None
        token, _, pending = token.partition("!")
        token, _, unconfirmed = token.partition("?")
        token, _, mark = token.partition("~")
        watch_id, _, cursor = token.rpartition("@")
        try:
            return cls(
                watch_id,
                int(cursor),
                pending,
                int(mark) if mark else None,
                int(unconfirmed) if unconfirmed else 0,
            )
        except ValueError:
            return None


@dataclass(frozen=True)
class WatchNews:
    """What a stretch of the stream said: the checkpoint was written, an agent exited, or the
    stream ended because the sandbox paused or the watch ended."""

    checkpoint_touched: bool = False
    agent_exited: bool = False
    ended: str | None = None  # "paused", or why the watch ended
    # The stream was followed past the news, so a pause right after it would have shown:
    # the sandbox ran when the news was read. False: not known (ask before touching it).
    settled: bool = True
    requests_touched: bool = False

    @classmethod
    def of(cls, seen: Touches, ended: str | None = None, *, settled: bool = True) -> WatchNews:
        return cls(seen.touched, seen.exited, ended, settled, seen.asked)

    def pending(self) -> str:
        return (
            ("x" if self.agent_exited else "")
            + ("t" if self.checkpoint_touched else "")
            + ("r" if self.requests_touched else "")
        )


def watch_handle(transport: Any, sandbox_id: str, token: WatchToken) -> AsyncWatchHandle:
    """A handle on an existing watch, without asking Runtime anything."""
    base = f"/v1/sandboxes/{quote(sandbox_id, safe='')}/files/watches"
    return AsyncWatchHandle(transport, base, {"id": token.watch_id, "cursor": token.cursor})


async def start_watch(
    sandbox: withruntime.AsyncSandbox, checkpoint_path: str, mark: int | None
) -> WatchToken:
    """A new watch on the checkpoint's folder (not recursive: the repo next to it is not
    watched), running until the sandbox stops, read by Runtime into the account's events too.
    `mark`: the feed's mark now (what happens from here on is news)."""
    folder = posixpath.dirname(checkpoint_path)
    options: dict[str, Any] = {"batch_ms": WATCH_BATCH_MS, "timeout_ms": 0, "webhook": True}
    try:
        handle = await sandbox.files.watch(folder, **options)
    except withruntime.ConflictError as error:
        if error.code != "too_many_watches":
            raise
        # At most four run in a sandbox: ours whose tokens were lost (a reset workflow) go.
        for watch in await sandbox.files.watches.list():
            if watch.get("path") == folder:
                await sandbox.files.watches.stop(str(watch["id"]))
        try:
            handle = await sandbox.files.watch(folder, **options)
        except withruntime.ConflictError as again:
            if again.code != "too_many_watches":
                raise
            # The account's webhook watches are all taken (a limit Runtime does not publish):
            # a plain watch, read only by a stream (through the feed, only its pauses show).
            handle = await sandbox.files.watch(folder, **{**options, "webhook": False})
    return WatchToken(handle.id, handle.cursor, mark=mark)


async def next_news(
    handle: AsyncWatchHandle, watched: Watched, wait_seconds: float, *, report_touch: bool
) -> tuple[WatchNews, WatchToken]:
    """Follow the stream until it says something that matters (a write only with
    `report_touch`), or `wait_seconds` pass. With little or no time left (a retried observe
    near its deadline) what the watch has delivered is still read, in one request. An exit
    still held in the watch's batch (`batchMs`) is not delivered yet: the caller asks the
    process after such a short read (agent_watch), so it is never missed for want of time."""
    if wait_seconds < STREAM_AT_LEAST_SECONDS:
        return await _pending_news(handle, watched, wait_seconds)
    seen = Touches()
    ended: str | None = None
    events = handle.events()
    try:
        async with asyncio.timeout(max(0.0, wait_seconds)):
            async for event in events:
                note(event, watched, seen)
                if seen.decisive(report_touch):
                    break
            else:
                ended = handle.exit_reason or "ended"
        if seen.decisive(report_touch):
            # Events can be old (a retried observe reads from its first cursor), and the
            # sandbox may have paused since: follow the stream until it goes quiet, so a
            # `paused` after them is seen before anything asks the sandbox (which wakes it).
            # This also takes the rest of the batch the SDK moved the cursor past.
            if await _settle(events, watched, seen):
                ended = handle.exit_reason or "ended"
    except TimeoutError:
        pass
    finally:
        # Ends the held request now rather than whenever the generator is collected.
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    return WatchNews.of(seen, ended), WatchToken(handle.id, handle.cursor)


async def _pending_news(
    handle: AsyncWatchHandle, watched: Watched, wait_seconds: float
) -> tuple[WatchNews, WatchToken]:
    wait_ms = int(max(0.0, wait_seconds) * 1000)
    seen = Touches()
    for event in await handle.get_new_events(wait_ms=wait_ms):
        note(event, watched, seen)
    news = WatchNews.of(seen, handle.exit_reason, settled=False)
    return news, WatchToken(handle.id, handle.cursor)


async def _settle(events: AsyncIterator[dict[str, Any]], watched: Watched, seen: Touches) -> bool:
    """Read on until the stream is quiet for SETTLE_SECONDS (at most SETTLE_MAX_SECONDS);
    True when it ended meanwhile (the sandbox paused, or the watch ended)."""
    give_up = asyncio.get_running_loop().time() + SETTLE_MAX_SECONDS
    while asyncio.get_running_loop().time() < give_up:
        try:
            event = await asyncio.wait_for(anext(events), SETTLE_SECONDS)
        except TimeoutError:
            return False
        except StopAsyncIteration:
            return True
        note(event, watched, seen)
    return False


def note(event: dict[str, Any], watched: Watched, seen: Touches) -> None:
    """One file event: the checkpoint or the requests file touched, or an agent's exit marker
    written."""
    for path in (event.get("path"), event.get("oldPath")):
        if not isinstance(path, str):
            continue
        name = posixpath.basename(path)
        path = posixpath.normpath(path)
        if path == watched.checkpoint:
            seen.touched = True
        elif path == watched.requests:
            seen.asked = True
        elif name.startswith(EXIT_MARKER_PREFIX) and not name.endswith(".tmp"):
            seen.exited = seen.exited or event.get("type") != "remove"
