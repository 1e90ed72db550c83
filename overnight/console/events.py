"""Server-sent events of the console: what `static/console.js` understands.

An element with `data-events="<url>"` opens an EventSource on the url. Each event is one of:
- `replace`: `{"id": ..., "html": ...}` puts `html` (a fragment the server drew, escaped like
  a page) in place of the element with that id; when there is none and `parent` is given, the
  fragment is added to that element (`where`: `start` or `end`);
- `remove`: `{"id": ...}` takes the element out;
- `reload`: the page reloads (what changed is more than a fragment says).
Comments (`: keep-alive`) keep proxies from closing an idle stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Literal

from starlette.responses import StreamingResponse

from overnight.console.render import SECURITY_HEADERS

KEEP_ALIVE = ": keep-alive\n\n"


def replace(element_id: str, html: str, *, parent: str | None = None, where: str = "end") -> str:
    data: dict[str, str] = {"id": element_id, "html": html}
    if parent is not None:
        data.update(parent=parent, where=where)
    return event("replace", data)


def remove(element_id: str) -> str:
    return event("remove", {"id": element_id})


def reload() -> str:
    return event("reload", {})


def event(kind: Literal["replace", "remove", "reload"], data: dict[str, str]) -> str:
    # JSON on one line: a newline in the fragment cannot end the event early.
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n"


def stream(events: AsyncIterator[str], stop: asyncio.Event | None = None) -> StreamingResponse:
    """The response of an SSE endpoint: `events` as they come, never cached or buffered;
    it ends when `stop` is set (pass `console_of(request).stopping`)."""
    headers = {
        **SECURITY_HEADERS,
        "cache-control": "no-store",
        # nginx and its kind buffer responses unless told not to.
        "x-accel-buffering": "no",
    }
    body = events if stop is None else until(events, stop)
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)


async def until(events: AsyncIterator[str], stop: asyncio.Event) -> AsyncIterator[str]:
    """`events` until `stop` is set (or the reader goes away)."""
    stopped = asyncio.ensure_future(stop.wait())
    following: asyncio.Future[str] | None = None
    try:
        while True:
            following = asyncio.ensure_future(anext(events))
            await asyncio.wait({following, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not following.done():
                return
            try:
                item = following.result()
            except StopAsyncIteration:
                return
            following = None
            yield item
    finally:
        stopped.cancel()
        if following is not None and not following.done():
            following.cancel()  # the generator ends inside the task that runs it
        else:
            closing = getattr(events, "aclose", None)
            if closing is not None:
                await closing()
