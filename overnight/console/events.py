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


def stream(events: AsyncIterator[str]) -> StreamingResponse:
    """The response of an SSE endpoint: `events` as they come, never cached or buffered."""
    headers = {
        **SECURITY_HEADERS,
        "cache-control": "no-store",
        # nginx and its kind buffer responses unless told not to.
        "x-accel-buffering": "no",
    }
    return StreamingResponse(events, media_type="text/event-stream", headers=headers)
