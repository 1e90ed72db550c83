"""Bounds on what one request may cost the console, whoever sends it (docs/console.md, "Who may
look and act"): a body larger than any form of the console is refused before it is read, and
only so many event streams are served at once.

The sign-in form is a POST anyone may send, and reading a form holds it in memory (starlette's
own bound is 1,000 fields of 1 MiB each); the largest form of the console is an answer of
4,000 characters. Each run page's event stream asks Temporal for the run's status every 2 s and
follows the run's output, so a reader's thousands of streams would be thousands of queries;
past the bound a stream is refused (503) and the page works without it (it only refreshes).
Within that bound one reader (a signed-in session, a bearer token, a proxy's user) holds at
most `MAX_STREAMS_PER_READER` at once (429 past it), so one reader's many tabs or a script
cannot take every place from the others.
"""

from __future__ import annotations

from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 64 * 1024
MAX_EVENT_STREAMS = 64
# A person's tabs open on run pages and the list: a few each; a script's loop: no more.
MAX_STREAMS_PER_READER = 8
RETRY_STREAM_SECONDS = 5


class _TooLarge(Exception):
    pass


class BodyLimit:
    """413 for a request body over `most` bytes: on its declared `Content-Length` before a
    byte of it is read, or (sent in chunks) as soon as what came passes the bound."""

    def __init__(self, app: ASGIApp, most: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.most = most

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and not (declared.isdigit() and int(declared) <= self.most):
            await _too_large(self.most)(scope, receive, send)
            return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.most:
                    raise _TooLarge
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except _TooLarge:
            if not started:
                await _too_large(self.most)(scope, receive, send)


def _too_large(most: int) -> PlainTextResponse:
    return PlainTextResponse(f"the request is over {most // 1024} KiB: the console takes none", 413)


class StreamLimit:
    """At most `most` event streams (`.../events`) served at once; past it, 503."""

    def __init__(self, app: ASGIApp, most: int = MAX_EVENT_STREAMS) -> None:
        self.app = app
        self.most = most
        self.open = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).endswith("/events"):
            await self.app(scope, receive, send)
            return
        if self.open >= self.most:
            refused = stream_refused(
                f"the console serves {self.most} live streams at once: the page works "
                "without one (reload it to see what changed)",
                503,
            )
            await refused(scope, receive, send)
            return
        self.open += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.open -= 1


class ReaderStreams:
    """How many event streams each reader holds now; a reader holding none is not kept (the
    table is as large as the streams open, at most `MAX_EVENT_STREAMS`)."""

    def __init__(self, most: int = MAX_STREAMS_PER_READER) -> None:
        self.most = most
        self.held: dict[str, int] = {}

    def take(self, reader: str) -> bool:
        """One more stream for `reader`: False when it holds `most` already."""
        count = self.held.get(reader, 0)
        if count >= self.most:
            return False
        self.held[reader] = count + 1
        return True

    def give_back(self, reader: str) -> None:
        count = self.held.get(reader, 0) - 1
        if count > 0:
            self.held[reader] = count
        else:
            self.held.pop(reader, None)


class ReadersStream(Response):
    """`stream` served while its reader holds a place of its own (429 when it holds all of
    them). The place is taken and given back in the one call that serves the stream, so a
    stream that ends any way (its reader gone, the server stopping, an error) gives it back."""

    def __init__(self, stream: Response, streams: ReaderStreams, reader: str) -> None:
        super().__init__(status_code=stream.status_code)
        self.stream = stream
        self.streams = streams
        self.reader = reader

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.streams.take(self.reader):
            refused = stream_refused(
                f"you hold {self.streams.most} live streams of this console already: close a "
                "tab of it (the page works without one; reload it to see what changed)",
                429,
            )
            await refused(scope, receive, send)
            return
        try:
            await self.stream(scope, receive, send)
        finally:
            self.streams.give_back(self.reader)


def stream_refused(text: str, status: int) -> PlainTextResponse:
    """A live stream refused for now (too many held): the page works without it."""
    return PlainTextResponse(text, status, headers={"retry-after": str(RETRY_STREAM_SECONDS)})
