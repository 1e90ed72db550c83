"""How `RuntimeProvider` watches an agent: through a held file-watch stream while this worker
has one of its `streams` free, else through the worker's event feed, which holds nothing open
(`activities.providers.runtime.watch_stream` speaks the stream, `watch_feed` the feed); news kept
across a pause, and the agent's exit read once its marker appears.

Runtime serves at most 128 requests at once per key, so the streams a worker holds are capped
(`OVERNIGHT_RUNTIME_STREAMS`, see `settings`): the workers sharing a key hold at most the sum
of theirs, whatever the number of runs. Each observe takes a stream if one is free when it
starts, so a run may be read one way, then the other; its token carries both the stream's
cursor and the feed's mark.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

import withruntime

from activities.models import SandboxInfo
from activities.providers.protocol import ProcessInfo, Sighting, WatchRequest
from activities.providers.runtime import watch_stream
from activities.providers.runtime.convert import (
    parse_time,
    process_info,
    sandbox_info,
    start_key_of,
)
from activities.providers.runtime.errors import runtime_call
from activities.providers.runtime.watch_feed import feed_news

if TYPE_CHECKING:
    from activities.providers.runtime.event_feed import EventFeed

# After its exit marker appears, an agent's process may take a moment to be reported ended.
EXIT_REPORT_TRIES = 25
EXIT_REPORT_PAUSE = 0.2
# Reported running still after those tries (a slow report under load), or at a new watch's
# first look with its marker already written (it ended before the watch began): asked again
# at the start of this many more reads, each waiting at most EXIT_RECHECK_SECONDS, so the exit
# is seen within about 25 s, not lost until the stall deadline. The marker is the agent's to
# write, so it only ever makes the watch ask Runtime: a false one costs about 30 requests.
EXIT_RECHECKS = 10
EXIT_RECHECK_SECONDS = 2.0
# How many runs' last read way (`RuntimeWatching.read_by`) is remembered.
READ_BY_KEPT = 10_000
# A mark taken from this worker's clock is set back this much, against a skew with Runtime's
# (events in between are taken twice, which is harmless; none is missed).
CLOCK_MARGIN_MS = 5000


def wall_mark() -> int:
    return int(time.time() * 1000) - CLOCK_MARGIN_MS


class RuntimeWatching:
    """Mixed into `RuntimeProvider` (which supplies `_client`, `_get`, `_handle`, `sandbox`,
    `_budget`, its event feed and its count of streams)."""

    _budget: float
    read_by: dict[str, str]

    if TYPE_CHECKING:

        def _client(self) -> withruntime.AsyncRuntime: ...

        async def _get(self, sandbox_id: str) -> withruntime.AsyncSandbox: ...

        def _handle(self, sandbox_id: str) -> withruntime.AsyncSandbox: ...

        async def sandbox(self, sandbox_id: str) -> SandboxInfo: ...

        def _feed(self) -> EventFeed: ...

        def _take_stream(self) -> bool: ...

        def _give_stream(self) -> None: ...

        def _streams_free(self) -> bool: ...

    async def watch(self, request: WatchRequest) -> Sighting:
        sandbox_id, process_id = request.sandbox_id, request.process_id
        checkpoint_path, requests_path = request.checkpoint_path, request.requests_path
        token, wait_seconds = request.token, request.wait_seconds
        report_touch = request.report_touch
        running = SandboxInfo(sandbox_id=sandbox_id, state="running")
        alive = ProcessInfo(process_id=process_id, state="running")
        known = watch_stream.WatchToken.decode(token)
        watched = watch_stream.Watched(checkpoint_path, requests_path)
        async with runtime_call(sandbox_id, self._budget + wait_seconds):
            if known is not None and known.pending:
                return await self._pending(sandbox_id, process_id, known)
            if known is not None and known.unconfirmed:
                confirmed, known = await self._confirm_exit(sandbox_id, process_id, known)
                if confirmed is not None:
                    return confirmed
            if known is None:
                # A new watch: look at the sandbox and the agent once, then follow the stream.
                sandbox = await self._get(sandbox_id)
                if sandbox.state != "running":
                    return Sighting(sandbox_info(sandbox.info), alive, False, None)
                fresh = await watch_stream.start_watch(sandbox, checkpoint_path, self._mark_now())
                raw = await self._raw_process(sandbox, process_id)
                process = ProcessInfo(process_id, "missing") if raw is None else process_info(raw)
                started = None if raw is None else parse_time(raw.get("startedAt"))
                touched, asked, marked = await asyncio.gather(
                    self._written_since(sandbox, checkpoint_path, started),
                    self._written_since(sandbox, requests_path, started),
                    self._exit_marked(sandbox, checkpoint_path, raw, process),
                )
                if marked:
                    # It exited before the watch began (its marker is no news to the watch).
                    fresh = dataclasses.replace(fresh, unconfirmed=EXIT_RECHECKS)
                first = sandbox_info(sandbox.info)
                return Sighting(first, process, touched, fresh.encode(), asked)
            try:
                recheck = known.unconfirmed > 0
                wait = min(wait_seconds, EXIT_RECHECK_SECONDS) if recheck else wait_seconds
                news, after = await self._news(sandbox_id, watched, known, wait, report_touch)
                after = dataclasses.replace(after, unconfirmed=known.unconfirmed)
            except withruntime.NotFoundError:
                # The watch is gone (it ended, or the sandbox did): start over next time (its
                # first look says whether the checkpoint changed).
                return Sighting(await self.sandbox(sandbox_id), alive, False, None)
            info = None
            # A short look (a retried observe near its deadline) can come before the exit
            # marker's event: a watch hands a change over only after its batch (`batchMs`), the
            # feed only after Runtime's read of the watch. So an exit that happened is not
            # missed for want of time, such a look that saw none asks the process once (after
            # the sandbox, so a paused one is not woken). A long wait asks nothing more.
            short = wait < watch_stream.STREAM_AT_LEAST_SECONDS and not recheck
            ask_process = short and news.ended is None and not news.agent_exited
            if news.ended is None and (not news.settled or ask_process):
                # No stream followed: whether it still runs is not known; a paused sandbox
                # must not be taken for a running one. Ask, without waking.
                info = await self.sandbox(sandbox_id)
            if news.ended is not None or (info is not None and info.state != "running"):
                info = info or await self.sandbox(sandbox_id)
                paused = info.state == "paused"
                later = dataclasses.replace(after, pending=news.pending())
                process = await self._settled(sandbox_id, process_id, info)
                return Sighting(info, process, False, later.encode() if paused else None)
            process = alive
            if news.agent_exited:
                process = await self._exit_of(sandbox_id, process_id)
                after = _unconfirmed_if_running(after, process)
            elif ask_process:
                process = await self._process_of(self._handle(sandbox_id), process_id)
            return Sighting(
                info or running,
                process,
                news.checkpoint_touched,
                after.encode(),
                news.requests_touched,
            )

    async def _news(
        self,
        sandbox_id: str,
        watched: watch_stream.Watched,
        known: watch_stream.WatchToken,
        wait_seconds: float,
        report_touch: bool,
    ) -> tuple[watch_stream.WatchNews, watch_stream.WatchToken]:
        """The watch's news through a held stream if this worker has one free, else through
        its event feed."""
        self._note_read_by(sandbox_id, "stream" if self._streams_free() else "feed")
        if self._take_stream():
            try:
                handle = watch_stream.watch_handle(self._client().sandboxes._t, sandbox_id, known)
                news, after = await watch_stream.next_news(
                    handle, watched, wait_seconds, report_touch=report_touch
                )
            finally:
                self._give_stream()
            return news, dataclasses.replace(after, mark=self._mark_now())
        mark = known.mark if known.mark is not None else wall_mark()
        news, mark = await feed_news(
            self._feed(), sandbox_id, watched, mark, wait_seconds, report_touch=report_touch
        )
        return news, dataclasses.replace(known, pending="", mark=mark)

    def _note_read_by(self, sandbox_id: str, how: str) -> None:
        """Which way each run was last read ("stream" or "feed"), for measuring each."""
        read_by = self.read_by
        read_by.pop(sandbox_id, None)
        read_by[sandbox_id] = how
        while len(read_by) > READ_BY_KEPT:
            del read_by[next(iter(read_by))]

    def _mark_now(self) -> int:
        """Where the feed stands now if it reads (events after it are news), else this
        worker's clock set back a margin."""
        feed = self._feed()
        return feed.mark_now() if feed.covered_from is not None else wall_mark()

    async def _pending(
        self, sandbox_id: str, process_id: str, known: watch_stream.WatchToken
    ) -> Sighting:
        """News read just before a pause: acted on once the sandbox runs again."""
        info = await self.sandbox(sandbox_id)
        if info.state != "running":
            return Sighting(
                info, await self._settled(sandbox_id, process_id, info), False, known.encode()
            )
        process = ProcessInfo(process_id=process_id, state="running")
        done = dataclasses.replace(known, pending="")
        if "x" in known.pending:
            process = await self._exit_of(sandbox_id, process_id)
            done = _unconfirmed_if_running(done, process)
        touched, asked = "t" in known.pending, "r" in known.pending
        return Sighting(info, process, touched, done.encode(), asked)

    async def _confirm_exit(
        self, sandbox_id: str, process_id: str, known: watch_stream.WatchToken
    ) -> tuple[Sighting | None, watch_stream.WatchToken]:
        """An exit marker's process that was still reported running, asked again: the sighting
        of its end, or None and the token to read on with. The sandbox is asked first: asking a
        paused sandbox's process would wake it (the read then finds it paused)."""
        info = await self.sandbox(sandbox_id)
        if info.state != "running":
            return None, known
        process = await self._process_of(self._handle(sandbox_id), process_id)
        if process.state == "running":
            return None, dataclasses.replace(known, unconfirmed=known.unconfirmed - 1)
        done = dataclasses.replace(known, unconfirmed=0)
        return Sighting(info, process, False, done.encode()), done

    async def _process_of(self, sandbox: withruntime.AsyncSandbox, process_id: str) -> ProcessInfo:
        raw = await self._raw_process(sandbox, process_id)
        return ProcessInfo(process_id, "missing") if raw is None else process_info(raw)

    async def _raw_process(
        self, sandbox: withruntime.AsyncSandbox, process_id: str
    ) -> dict[str, Any] | None:
        try:
            info: dict[str, Any] = (await sandbox.process(process_id)).info
        except (withruntime.NotFoundError, withruntime.ConflictError):
            return None
        return info

    async def _written_since(
        self, sandbox: withruntime.AsyncSandbox, path: str | None, started: datetime | None
    ) -> bool:
        """Stat first: whether the checkpoint (or the kit's requests file) may have been
        written since the agent started (before the watch began). One written before (the copy
        a new sandbox starts with, or what an earlier process wrote, already read) is not
        downloaded again; an absent one is no news. Without the agent's start time, it may
        have. No path (no requests file watched): no."""
        if path is None:
            return False
        if started is None:
            return True
        try:
            stat = await sandbox.files.stat(path)
        except (withruntime.NotFoundError, withruntime.ConflictError):
            return True
        if not stat.get("exists"):
            return False
        modified = parse_time(stat.get("modifiedAt"))
        return modified is None or modified >= started

    async def _exit_marked(
        self,
        sandbox: withruntime.AsyncSandbox,
        checkpoint_path: str,
        raw: dict[str, Any] | None,
        process: ProcessInfo,
    ) -> bool:
        """Whether an agent still reported running has written its exit marker already: it
        ended between its spawn and this watch's first look, reported late."""
        key = None if raw is None or process.state != "running" else start_key_of(raw)
        if key is None:
            return False
        try:
            stat = await sandbox.files.stat(watch_stream.exit_marker_path(checkpoint_path, key))
        except (withruntime.NotFoundError, withruntime.ConflictError):
            return False
        return bool(stat.get("exists"))

    async def _exit_of(self, sandbox_id: str, process_id: str) -> ProcessInfo:
        """The agent's process once its exit marker appeared: given a moment to be reported
        ended (the marker is written just before the wrapper exits)."""
        sandbox = self._handle(sandbox_id)
        for _ in range(EXIT_REPORT_TRIES):
            process = await self._process_of(sandbox, process_id)
            if process.state != "running":
                return process
            await asyncio.sleep(EXIT_REPORT_PAUSE)
        return process

    async def _settled(self, sandbox_id: str, process_id: str, info: SandboxInfo) -> ProcessInfo:
        """The agent of a sandbox that is no longer running, without waking it."""
        if info.state == "stopped":
            return ProcessInfo(process_id=process_id, state="killed")
        if info.state == "missing":
            return ProcessInfo(process_id=process_id, state="missing")
        # Paused: frozen with its sandbox, not asked (asking would wake it).
        return ProcessInfo(process_id=process_id, state="running")


def _unconfirmed_if_running(
    token: watch_stream.WatchToken, process: ProcessInfo
) -> watch_stream.WatchToken:
    """The token after an exit marker: its process asked again on later reads while it is still
    reported running."""
    unconfirmed = EXIT_RECHECKS if process.state == "running" else 0
    return dataclasses.replace(token, unconfirmed=unconfirmed)
