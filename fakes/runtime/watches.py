"""File watches of the fake Runtime API, by polling the sandbox's folder in the engine.

- `POST …/files/watches` `{path, recursive, events, include, exclude, batchMs, timeoutMs}` ->
  `{"id","path","recursive","events","include","exclude","batchMs","timeoutMs","cursor":0,
  "state":"running","createdAt"}`; at most `max_watches` running per sandbox (409
  `too_many_watches`). Starting a watch is a guest call: it wakes a paused sandbox.
- `GET …/files/watches` -> `{"data":[watch…]}` (running ones); `DELETE …/files/watches/{id}`
  -> `{"stopped": true}` (false if it had already ended).
- `GET …/files/watches/{id}/events?cursor=N`: `waitMs=M` (at most `max_wait_ms`) answers
  `{"events":[…],"nextCursor":N2,"notices":[],"ended":false}` (an ended watch adds the notice
  `{"k":"end","reason":…}` and `"ended":true`); `follow=true` streams NDJSON lines
  `{"k":"events","events":[…],"cursor":N2}`, ending with `{"k":"continue","cursor":N}` at the
  server's time limit, `{"k":"paused","cursor":N}` when the sandbox is or becomes paused, or
  `{"k":"end","reason":"stopped"|"timeout"|"root-removed"}`. Reading never wakes a sandbox.

Events: `{"type":"create"|"write"|"remove"|"rename"|"chmod","path":"/workspace/…"}`, a rename
with `"oldPath"`, writes folded per batch with `"count"` (see `scan`). The cursor counts events.
"""

from __future__ import annotations

import asyncio
import posixpath
import re
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import SandboxNotFound, SandboxProvider
from fakes.runtime.commands import ndjson, stream
from fakes.runtime.http import (
    Request,
    Response,
    Route,
    RouteTable,
    error_response,
    json_response,
)
from fakes.runtime.routes import refusal
from fakes.runtime.rules import (
    DEFAULT_WATCH_MS,
    MAX_WATCH_MS,
    WATCH_EVENT_TYPES,
    WATCH_FIELDS,
    Rules,
)
from fakes.runtime.sandboxes import Sandboxes, iso
from fakes.runtime.scan import Filters, Look, differences, fold, look

WATCHES = r"^/v1/sandboxes/([^/:]+)/files/watches"
_WATCH_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass
class Watch:
    id: str
    sandbox_id: str
    path: str
    root: Path
    filters: Filters
    kinds: frozenset[str]
    batch_ms: int
    timeout_ms: int
    last: Look
    started: float = field(default_factory=time.monotonic)
    created_at: float = field(default_factory=time.time)
    events: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)
    pending_since: float | None = None
    ended: str | None = None
    # Started with `webhook: true`: Runtime reads it into `sandbox.files.changed` events.
    webhook: bool = False
    hook_cursor: int = 0
    hook_read_at: float = float("-inf")
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": self.path,
            "recursive": self.filters.recursive,
            "events": sorted(self.kinds),
            "include": list(self.filters.include),
            "exclude": list(self.filters.exclude),
            "batchMs": self.batch_ms,
            "timeoutMs": self.timeout_ms,
            "cursor": len(self.events),
            "state": "running" if self.ended is None else "ended",
            "endReason": self.ended,
            "createdAt": iso(self.created_at),
            "webhook": self.webhook,
        }


class WatchRoutes:
    """The watches of every sandbox, each kept up to date by a scanner task of its own."""

    def __init__(self, engine: SandboxProvider, sandboxes: Sandboxes, rules: Rules) -> None:
        self.engine = engine
        self.sandboxes = sandboxes
        self.rules = rules
        self.watches: dict[str, Watch] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def routes(self) -> RouteTable:
        one = WATCHES + r"/([^/:]+)"
        return [
            Route("POST", re.compile(WATCHES + "$"), "watch_start", self._start, guest=True),
            Route("GET", re.compile(WATCHES + "$"), "watch_list", self._list),
            Route("DELETE", re.compile(one + "$"), "watch_stop", self._stop),
            Route("GET", re.compile(one + "/events$"), "watch_events", self._events),
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _start(self, request: Request, groups: list[str]) -> Response:
        record, _ = await self.sandboxes.get(groups[0])
        body = request.json() or {}
        problems = _watch_problems(body, self.rules)
        if problems:
            return refusal(400, "invalid_request", problems)
        watch_id = body.get("id") or f"w_{uuid.uuid4().hex[:12]}"
        if watch_id in self.watches and self.watches[watch_id].sandbox_id == record.id:
            return json_response(self.watches[watch_id].json())
        running = [w for w in self.watches.values() if w.sandbox_id == record.id and not w.ended]
        if len(running) >= self.rules.max_watches:
            return error_response(
                409, "too_many_watches", f"At most {self.rules.max_watches} watches a sandbox."
            )
        hooks = self.rules.max_hook_watches
        if body.get("webhook") and hooks is not None:
            if sum(1 for w in self.watches.values() if w.webhook and not w.ended) >= hooks:
                return error_response(
                    409, "too_many_watches", f"At most {hooks} webhook watches an account."
                )
        if not isinstance(self.engine, LocalProvider):
            return error_response(501, "unsupported", "Watches need the local engine.")
        path = posixpath.normpath(body["path"])
        root = self.engine.engine.host_path(record.id, path)
        if not root.is_dir():
            missing = not root.exists()
            status, code = (404, "file_not_found") if missing else (400, "invalid_request")
            return error_response(status, code, f"{path} is not a folder.")
        filters = Filters(
            bool(body.get("recursive", False)),
            tuple(body.get("include") or ()),
            tuple(body.get("exclude") or ()),
        )
        first: Look | None = await asyncio.to_thread(look, root, filters)
        watch = Watch(
            id=watch_id,
            sandbox_id=record.id,
            path=path,
            root=root,
            filters=filters,
            kinds=frozenset(body.get("events") or WATCH_EVENT_TYPES),
            batch_ms=int(body.get("batchMs", 0)),
            timeout_ms=int(body.get("timeoutMs", DEFAULT_WATCH_MS)),
            last=first or {},
            webhook=bool(body.get("webhook", False)),
        )
        self.watches[watch.id] = watch
        task = asyncio.get_running_loop().create_task(self._scan_until_ended(watch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return json_response(watch.json(), 201)

    async def _list(self, request: Request, groups: list[str]) -> Response:
        record, _ = await self.sandboxes.get(groups[0])
        running = [w for w in self.watches.values() if w.sandbox_id == record.id and not w.ended]
        return json_response({"data": [w.json() for w in running]})

    def _watch(self, sandbox_id: str, watch_id: str) -> Watch | None:
        watch = self.watches.get(watch_id)
        return watch if watch is not None and watch.sandbox_id == sandbox_id else None

    async def _stop(self, request: Request, groups: list[str]) -> Response:
        record, _ = await self.sandboxes.get(groups[0])
        watch = self._watch(record.id, groups[1])
        if watch is None:
            return error_response(404, "watch_not_found", "No such watch.")
        was_running = watch.ended is None
        watch.ended = watch.ended or "stopped"
        return json_response({"stopped": was_running})

    async def _events(self, request: Request, groups: list[str]) -> Response:
        record, _ = await self.sandboxes.get(groups[0])
        watch = self._watch(record.id, groups[1])
        if watch is None:
            return error_response(404, "watch_not_found", "No such watch.")
        cursor = min(max(0, int(request.arg("cursor") or 0)), len(watch.events))
        if request.arg("follow") == "true":
            return stream(self._follow(watch, cursor))
        wait = min(int(request.arg("waitMs") or 0), self.rules.max_wait_ms) / 1000
        until = time.monotonic() + wait
        while len(watch.events) <= cursor and not watch.ended and time.monotonic() < until:
            await asyncio.sleep(self.rules.poll_seconds)
        notices = [] if watch.ended is None else [{"k": "end", "reason": watch.ended}]
        answer = {
            "events": watch.events[cursor:],
            "nextCursor": len(watch.events),
            "notices": notices,
            "ended": watch.ended is not None,
        }
        return json_response(answer)

    async def _follow(self, watch: Watch, cursor: int) -> AsyncIterator[bytes]:
        until = time.monotonic() + self.rules.stream_seconds
        while True:
            state = await self._state(watch.sandbox_id)
            if state == "paused":
                await self._step(watch, flush=True)  # what changed before the pause goes first
            if len(watch.events) > cursor:
                news, cursor = watch.events[cursor:], len(watch.events)
                yield ndjson({"k": "events", "events": news, "cursor": cursor})
            if watch.ended is not None or state in ("stopped", "missing"):
                yield ndjson({"k": "end", "reason": watch.ended or "stopped"})
                return
            if state == "paused":
                yield ndjson({"k": "paused", "cursor": cursor})
                return
            if time.monotonic() >= until:
                yield ndjson({"k": "continue", "cursor": cursor})
                return
            await asyncio.sleep(self.rules.poll_seconds)

    async def _state(self, sandbox_id: str) -> str:
        """The sandbox's state as the engine has it, without waking it."""
        try:
            return (await self.sandboxes.get(sandbox_id))[1].state
        except SandboxNotFound:
            return "missing"

    async def _scan_until_ended(self, watch: Watch) -> None:
        while watch.ended is None:
            await asyncio.sleep(self.rules.poll_seconds)
            await self._step(watch)

    async def _step(self, watch: Watch, *, flush: bool = False) -> None:
        """Look at the folder once; hand over the batch once `batchMs` passed (or `flush`)."""
        async with watch.lock:
            if watch.ended is not None:
                return
            if watch.timeout_ms and time.monotonic() - watch.started >= watch.timeout_ms / 1000:
                watch.ended = "timeout"
                return
            found: Look | None = await asyncio.to_thread(look, watch.root, watch.filters)
            # The state is read after the look, not before: a stop marks the sandbox stopped
            # before it frees its disk, so a look that met the disk going (gone, or half
            # gone) is always followed by a read that says so. On Runtime a stop ends the
            # watch as "stopped", and its files never vanish under it; "root-removed" is
            # only for the watched folder removed while the sandbox runs.
            state = await self._state(watch.sandbox_id)
            if state in ("stopped", "missing"):
                watch.ended = "stopped"
                return
            if found is None:
                watch.ended = "root-removed"
                return
            news = [
                {**e, "path": self._path(watch, e["path"])}
                | ({"oldPath": self._path(watch, e["oldPath"])} if "oldPath" in e else {})
                for e in differences(watch.last, found)
                if e["type"] in watch.kinds and watch.filters.wanted(e["path"])
            ]
            watch.last = found
            now = time.monotonic()
            if news and watch.pending_since is None:
                watch.pending_since = now
            watch.pending += news
            if watch.pending and (
                flush
                or state == "paused"
                or now - (watch.pending_since or now) >= watch.batch_ms / 1000
            ):
                watch.events += fold(watch.pending)
                watch.pending, watch.pending_since = [], None
            if watch.webhook and state != "paused":
                self._hook(watch, now)

    def _hook(self, watch: Watch, now: float) -> None:
        """Runtime's own read of a webhook watch: what changed since its last read, at most
        once a window (not while the sandbox is paused: the watch never keeps it awake)."""
        if len(watch.events) <= watch.hook_cursor:
            return
        if now - watch.hook_read_at < self.rules.file_hook_window_seconds:
            return
        news = watch.events[watch.hook_cursor :]
        watch.hook_cursor, watch.hook_read_at = len(watch.events), now
        most = self.rules.file_hook_events
        record = self.sandboxes.records.get(watch.sandbox_id)
        data = {
            "sandbox": {"id": watch.sandbox_id, "name": record.name if record else None},
            "watch": {"id": watch.id, "path": watch.path},
            "events": news[:most],
            "more": max(0, len(news) - most),
            "overflow": False,
        }
        self.sandboxes.events.add("sandbox.files.changed", watch.sandbox_id, data)

    @staticmethod
    def _path(watch: Watch, rel: str) -> str:
        return posixpath.join(watch.path, rel)


def _watch_problems(body: Any, rules: Rules) -> list[tuple[str, str]]:
    if not isinstance(body, dict):
        return [("body", "The body must be a JSON object.")]
    problems: list[tuple[str, str]] = []
    if rules.refuse_unknown_fields:
        problems += [(k, f"Unknown field {k}.") for k in sorted(set(body) - WATCH_FIELDS)]
    if not isinstance(body.get("path"), str) or not body["path"].startswith("/"):
        problems.append(("path", "path must be an absolute path."))
    kinds = body.get("events")
    if kinds is not None and not (isinstance(kinds, list) and set(kinds) <= WATCH_EVENT_TYPES):
        problems.append(("events", f"events must be a list of {sorted(WATCH_EVENT_TYPES)}."))
    for name in ("include", "exclude"):
        globs = body.get(name)
        if globs is not None and not (
            isinstance(globs, list) and all(isinstance(g, str) for g in globs)
        ):
            problems.append((name, f"{name} must be a list of patterns."))
    timeout = body.get("timeoutMs", DEFAULT_WATCH_MS)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int)
        or not 0 <= timeout <= MAX_WATCH_MS
    ):
        problems.append(("timeoutMs", f"timeoutMs must be 0 to {MAX_WATCH_MS}."))
    batch = body.get("batchMs", 0)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 0 <= batch <= 60_000:
        problems.append(("batchMs", "batchMs must be 0 to 60000."))
    if "webhook" in body and not isinstance(body["webhook"], bool):
        problems.append(("webhook", "webhook must be true or false."))
    watch_id = body.get("id")
    if watch_id is not None and not (isinstance(watch_id, str) and _WATCH_ID.match(watch_id)):
        problems.append(("id", "id must be 1 to 64 letters, digits, '_', '.' or '-'."))
    return problems
