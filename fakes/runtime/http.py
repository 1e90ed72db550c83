"""A minimal HTTP/1.1 server on asyncio streams: just what the `withruntime` client speaks.

Every answer is framed (`Content-Length`, or chunked for a stream), connections are kept
alive, and an answer may be withheld entirely (a dropped connection) to test the client.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # percent-decoded
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lower-cased
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    # Sent chunked as it is produced (an NDJSON event stream).
    stream: AsyncIterator[bytes] | None = None
    # Close the connection without answering at all.
    drop: bool = False


Handler = Callable[[Request], Awaitable[Response]]
RouteHandler = Callable[[Request, list[str]], Awaitable[Response]]


class Route(NamedTuple):
    """A route gets the request and its path pattern's groups. `name` is what the counters
    call it; `guest` routes are served by the sandbox itself, so touching them on a paused
    sandbox wakes it (and on a stopped one finds no disk)."""

    method: str
    pattern: re.Pattern[str]
    name: str
    handler: RouteHandler
    guest: bool = False


RouteTable = list[Route]


def json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        status, json.dumps(value).encode(), {"content-type": "application/json"} | (headers or {})
    )


def error_response(
    status: int, code: str, message: str, *, headers: dict[str, str] | None = None, **extra: Any
) -> Response:
    """An error in Runtime's shape: `{"error": {"code", "message", "status", ...}}`."""
    error = {"code": code, "message": message, "status": status, "requestId": "req_fake"} | extra
    return json_response({"error": error}, status, headers)


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    line = await reader.readline()
    if not line.strip():
        return None
    method, target, _version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers: dict[str, str] = {}
    while True:
        raw = await reader.readline()
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length") or 0)
    body = await reader.readexactly(length) if length else b""
    parts = urlsplit(target)
    query = parse_qs(parts.query, keep_blank_values=True)
    return Request(method.upper(), unquote(parts.path), query, headers, body)


def _head(response: Response, framing: dict[str, str]) -> bytes:
    try:
        phrase = HTTPStatus(response.status).phrase
    except ValueError:
        phrase = "Overloaded" if response.status == 529 else "Unknown"
    lines = [f"HTTP/1.1 {response.status} {phrase}"]
    lines += [f"{name}: {value}" for name, value in (response.headers | framing).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def serve_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handler: Handler
) -> None:
    """Answer requests on one kept-alive connection until the client closes it."""
    try:
        while True:
            request = await _read_request(reader)
            if request is None:
                return
            response = await handler(request)
            if response.drop:
                writer.transport.abort()
                return
            if response.stream is None:
                framing = {"content-length": str(len(response.body))}
                writer.write(_head(response, framing) + response.body)
            else:
                # The head goes at once: a held stream must not look like no answer.
                writer.write(_head(response, {"transfer-encoding": "chunked"}))
                if not await _send_stream(reader, writer, response.stream):
                    return
                writer.write(b"0\r\n\r\n")
            await writer.drain()
            if request.headers.get("connection", "").lower() == "close":
                return
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        writer.close()


async def _send_stream(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stream: AsyncIterator[bytes]
) -> bool:
    """Send a stream's pieces as chunks; False if the client went away first.

    The client sends nothing while it waits for an answer (it never pipelines), so the end of
    its side means it closed: the stream then ends at once, as on a real server, rather than
    at its next write (which for a quiet watch may be minutes away)."""

    async def pump() -> None:
        await writer.drain()
        async for piece in stream:
            if piece:
                writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                await writer.drain()

    sending = asyncio.ensure_future(pump())
    hangup = asyncio.ensure_future(reader.read(1))
    try:
        await asyncio.wait({sending, hangup}, return_when=asyncio.FIRST_COMPLETED)
        if sending.done():
            sending.result()  # a failed write ends the connection
            return not hangup.done()  # a byte early would be a pipelined request: give up
        return False
    finally:
        for task in (sending, hangup):
            task.cancel()
        await asyncio.gather(sending, hangup, return_exceptions=True)
        # The stream ends now, however it ended (its slot is given back).
        await _close(stream)


async def _close(stream: AsyncIterator[bytes]) -> None:
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()
