"""The account's events in the fake Runtime API: `GET /v1/events`, as the public docs
(`observability.md`, "Events") describe it.

- Lifecycle events of sandboxes: `sandbox.created`, `sandbox.running`, `sandbox.paused`,
  `sandbox.woken`, `sandbox.stopped` (with `stopReason`), each carrying the sandbox as it was
  (`data.sandbox`: id, name, labels, state, previousState, stopReason, vcpu, memoryMiB). The
  fake's engine changes states on its own (a lease ends), so the fake notices a change at its
  next look at the sandbox: every request about it, and every tick of a watch's scanner.
- `sandbox.files.changed` from a file watch started with `webhook: true` (see `watches`): what
  changed since the hook last read the watch, at most once every `file_hook_window_seconds` a
  watch, with up to `file_hook_events` changes (`more` counts the rest), `data.watch` its id
  and path.
- `GET /v1/events?resourceId=&type=&cursor=&limit=` answers `{"data": [...], "nextCursor"}`,
  newest first; `limit` 1 to 100 (default 100); a page past the oldest has `nextCursor: null`.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from fakes.runtime.http import Request, Response, Route, RouteTable, error_response, json_response

MAX_LIMIT = 100
# The fake keeps this many events (the real service keeps 14 days).
KEPT_EVENTS = 500_000
LIFECYCLE = {
    ("running", "paused"): "sandbox.paused",
    ("pausing", "paused"): "sandbox.paused",
    ("paused", "running"): "sandbox.woken",
    ("resuming", "running"): "sandbox.woken",
}


def _iso_ms(seconds: float) -> str:
    return (
        datetime.fromtimestamp(seconds, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


class EventLog:
    """Every event of the account, oldest first, with an index by resource."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[dict[str, Any]] = []
        self._by_resource: dict[str, list[int]] = defaultdict(list)
        self._states: dict[str, str] = {}

    def add(self, kind: str, resource_id: str, data: dict[str, Any]) -> dict[str, Any]:
        event = {
            "id": str(uuid.uuid4()),
            "type": kind,
            "createdAt": _iso_ms(time.time()),
            "data": data,
        }
        with self._lock:
            if len(self._events) >= KEPT_EVENTS:
                return event
            self._by_resource[resource_id].append(len(self._events))
            self._events.append(event)
        return event

    def sandbox_seen(self, sandbox: dict[str, Any]) -> None:
        """A look at a sandbox (its API object): an event for each change of state since the
        last look."""
        sandbox_id = str(sandbox["id"])
        state = str(sandbox.get("state") or "")
        with self._lock:
            before = self._states.get(sandbox_id)
            if before == state:
                return
            self._states[sandbox_id] = state
        kinds: list[str] = []
        if before is None:
            kinds.append("sandbox.created")
            if state == "running":
                kinds.append("sandbox.running")
        elif state == "stopped":
            kinds.append("sandbox.stopped")
        elif (before, state) in LIFECYCLE:
            kinds.append(LIFECYCLE[(before, state)])
        elif state == "running" and before == "starting":
            kinds.append("sandbox.running")
        elif state == "paused":
            kinds.append("sandbox.paused")
        for kind in kinds:
            self.add(kind, sandbox_id, {"sandbox": _shown(sandbox, before)})

    def page(
        self, resource_id: str | None, kind: str | None, start: int | None, limit: int
    ) -> tuple[list[dict[str, Any]], int | None]:
        """Up to `limit` events at or before index `start` (None: the newest), newest first,
        and the index to go on from (None: none older)."""
        with self._lock:
            indexes = self._by_resource.get(resource_id, []) if resource_id else None
            found: list[dict[str, Any]] = []
            if indexes is not None:
                position = len(indexes) - 1
                while position >= 0 and start is not None and indexes[position] > start:
                    position -= 1
                while position >= 0 and len(found) < limit:
                    event = self._events[indexes[position]]
                    position -= 1
                    if kind is None or event["type"] == kind:
                        found.append(event)
                after = indexes[position] if position >= 0 else None
                return found, after
            at = len(self._events) - 1 if start is None else min(start, len(self._events) - 1)
            while at >= 0 and len(found) < limit:
                event = self._events[at]
                at -= 1
                if kind is None or event["type"] == kind:
                    found.append(event)
            return found, (at if at >= 0 else None)

    def count(self, kind: str | None = None) -> int:
        with self._lock:
            return sum(1 for e in self._events if kind is None or e["type"] == kind)


def _shown(sandbox: dict[str, Any], before: str | None) -> dict[str, Any]:
    keep = ("id", "name", "labels", "state", "stopReason", "vcpu", "memoryMiB")
    shown = {k: sandbox.get(k) for k in keep}
    shown["previousState"] = before
    return shown


class EventRoutes:
    def __init__(self, log: EventLog) -> None:
        self.log = log

    def routes(self) -> RouteTable:
        return [Route("GET", re.compile(r"^/v1/events$"), "events", self._list)]

    async def _list(self, request: Request, _: list[str]) -> Response:
        problems: list[tuple[str, str]] = []
        limit_text = request.arg("limit") or str(MAX_LIMIT)
        limit = int(limit_text) if limit_text.isdigit() else 0
        if not 1 <= limit <= MAX_LIMIT:
            problems.append(("limit", f"limit must be 1 to {MAX_LIMIT}."))
        cursor = request.arg("cursor")
        start: int | None = None
        if cursor is not None:
            if not re.fullmatch(r"e[0-9]+", cursor):
                problems.append(("cursor", "cursor is not one this API gave."))
            else:
                start = int(cursor[1:])
        if problems:
            fields = [name for name, _ in problems]
            message = " ".join(text for _, text in problems)
            details = {"fields": fields, "field": fields[0]}
            return error_response(400, "invalid_request", message, details=details)
        events, after = self.log.page(request.arg("resourceId"), request.arg("type"), start, limit)
        return json_response({"data": events, "nextCursor": None if after is None else f"e{after}"})
