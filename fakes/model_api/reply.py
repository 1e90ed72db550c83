"""What the server sends for one turn, either API: a pure value the renderers build."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Reply:
    """An HTTP answer: `events` (Server-Sent Events, sent chunked one by one) for a stream,
    else `body`. `cut_after` events then the stream stops: closed, or held open silent when
    `hold_open`. `call_ids` are the tool calls it makes, for the request log."""

    status: int
    headers: dict[str, str]
    events: tuple[bytes, ...] | None = None
    body: bytes = b""
    delay_seconds: float = 0.0
    cut_after: int | None = None
    hold_open: bool = False
    call_ids: tuple[str, ...] = field(default_factory=tuple)

    @property
    def streamed(self) -> bool:
        return self.events is not None

    def events_to_send(self) -> tuple[bytes, ...]:
        events = self.events or ()
        return events if self.cut_after is None else events[: self.cut_after]


def sse(event: str, data: dict[str, Any]) -> bytes:
    """One Server-Sent Event: `event:` and one `data:` line of JSON."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def json_body(value: Any) -> bytes:
    return json.dumps(value).encode()


STREAM_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-cache"}
JSON_HEADERS = {"content-type": "application/json"}
