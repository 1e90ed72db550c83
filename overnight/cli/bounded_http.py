"""A small HTTP/1.1 server on asyncio whose every resource has a bound: the codec server's.

Whoever reaches a server may hold its connections half-sent, declare huge bodies, or open
many at once. Here:

- a connection costs no thread: it waits on the event loop, and the handler alone runs in a
  small pool of `Limits.workers` threads;
- the request line, the headers and the body must all arrive within `read_timeout_seconds` of
  the connection's start (a 408, then the connection is closed), and the answer must be taken
  within `write_timeout_seconds`;
- the head is at most `max_header_bytes` (431); a body at most `max_body_bytes`, refused (413)
  from its `Content-Length` before any of it is read; chunked bodies are refused (411);
- at most `max_connections` connections are open at once (one more is answered 503 at once);
- a body being read or handled holds its declared length of `max_buffered_bytes`: one that
  does not fit beside those is answered 503 (`Retry-After`) before it is read, so many big
  bodies at once cost a bounded amount of memory.

One request per connection (`Connection: close`). `check` sees each request's head before its
body is read (refusing it there reads none of it), and `headers_for` adds headers to every
answer to a request whose head was read (CORS, for instance).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus

from overnight.core.asyncio_servers import close_server

# What a refused body is read and dropped for, at most, so that a client still sending it
# reads the answer rather than a reset connection.
DRAIN_BYTES = 1024 * 1024
DRAIN_SECONDS = 1.0
RETRY_AFTER_SECONDS = 1


@dataclass(frozen=True)
class Limits:
    read_timeout_seconds: float = 10.0
    write_timeout_seconds: float = 10.0
    max_header_bytes: int = 32 * 1024
    max_body_bytes: int = 6 * 1024 * 1024
    max_connections: int = 512
    max_buffered_bytes: int = 24 * 1024 * 1024
    workers: int = 4


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    # Names in lower case; a repeated header's values joined by ", ".
    headers: Mapping[str, str]
    body: bytes = b""

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]


@dataclass(frozen=True)
class Response:
    status: HTTPStatus
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"


@dataclass
class _Gauges:
    connections: int = 0
    buffered_bytes: int = 0
    tasks: dict[asyncio.Task[None], asyncio.StreamWriter] = field(default_factory=dict)


class _Refused(Exception):
    def __init__(self, status: HTTPStatus, message: str, *headers: tuple[str, str]) -> None:
        super().__init__(message)
        self.response = Response(status, _error_body(message), headers)


Handler = Callable[[Request], Response]
Check = Callable[[Request], Response | None]
HeadersFor = Callable[[Request], tuple[tuple[str, str], ...]]


class BoundedHttpServer:
    """Serves `handler` on `sock` (bound and listening) from the running loop: `await start()`,
    `await close()`. `connections` and `buffered_bytes` are the gauges of what it holds."""

    def __init__(
        self,
        sock: socket.socket,
        handler: Handler,
        *,
        limits: Limits,
        check: Check = lambda request: None,
        headers_for: HeadersFor = lambda request: (),
        server_name: str = "bounded-http",
        log: logging.Logger | None = None,
    ) -> None:
        self.limits = limits
        self._sock = sock
        self._handler = handler
        self._check = check
        self._headers_for = headers_for
        self._server_name = server_name
        self._log = log or logging.getLogger(__name__)
        self._gauges = _Gauges()
        self._pool = ThreadPoolExecutor(limits.workers, thread_name_prefix=server_name)
        self._server: asyncio.Server | None = None

    @property
    def connections(self) -> int:
        return self._gauges.connections

    @property
    def buffered_bytes(self) -> int:
        return self._gauges.buffered_bytes

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._connection, sock=self._sock, limit=self.limits.max_header_bytes
        )

    async def close(self) -> None:
        if self._server is not None:
            await close_server(self._server)
            await self._server.wait_closed()
        # Cut every connection: its reads fail and it ends; one in the handler is cancelled.
        for writer in list(self._gauges.tasks.values()):
            writer.transport.abort()
        tasks = list(self._gauges.tasks)
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=1.0)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        gauges = self._gauges
        task = asyncio.current_task()
        if task is not None:
            gauges.tasks[task] = writer
        gauges.connections += 1
        try:
            if gauges.connections > self.limits.max_connections:
                busy = _Refused(
                    HTTPStatus.SERVICE_UNAVAILABLE,
                    "too many connections: try again",
                    ("Retry-After", str(RETRY_AFTER_SECONDS)),
                )
                await self._send(writer, busy.response, None)
                return
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away, or would not take its answer
        except asyncio.CancelledError:
            pass  # the server closes: this connection's task ends here, quietly
        finally:
            gauges.connections -= 1
            if task is not None:
                gauges.tasks.pop(task, None)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.read_timeout_seconds
        request: Request | None = None
        reserved = 0
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.LimitOverrunError:
                raise _Refused(
                    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                    f"the request's head is over {self.limits.max_header_bytes} bytes",
                ) from None
            request = _parse_head(head)
            length = self._body_length(request)
            refused = self._check(request)
            if refused is not None:
                await self._send(writer, refused, request)
                await self._drain(reader, length)
                return
            if self._gauges.buffered_bytes + length > self.limits.max_buffered_bytes:
                raise _Refused(
                    HTTPStatus.SERVICE_UNAVAILABLE,
                    "busy with other bodies: try again",
                    ("Retry-After", str(RETRY_AFTER_SECONDS)),
                )
            reserved = length
            self._gauges.buffered_bytes += reserved
            if request.headers.get("expect", "").lower() == "100-continue" and length:
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            async with asyncio.timeout_at(deadline):
                body = await reader.readexactly(length) if length else b""
            whole = Request(request.method, request.target, request.headers, body)
            try:
                answer = await loop.run_in_executor(self._pool, self._handler, whole)
            except Exception:  # noqa: BLE001 - answered, and logged without the body
                self._log.exception("%s %s failed", request.method, request.path)
                answer = Response(HTTPStatus.INTERNAL_SERVER_ERROR, _error_body("internal error"))
            await self._send(writer, answer, request)
        except TimeoutError:
            late = _Refused(HTTPStatus.REQUEST_TIMEOUT, "the request was not sent in time")
            await self._send(writer, late.response, request)
        except _Refused as refused:
            await self._send(writer, refused.response, request)
            if request is not None and refused.response.status in (
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                HTTPStatus.SERVICE_UNAVAILABLE,
            ):
                await self._drain(reader, _declared(request))
        finally:
            self._gauges.buffered_bytes -= reserved

    def _body_length(self, request: Request) -> int:
        headers = request.headers
        if "transfer-encoding" in headers:
            raise _Refused(HTTPStatus.LENGTH_REQUIRED, "send the body with a Content-Length")
        if "content-length" not in headers:
            if request.method == "POST":
                raise _Refused(HTTPStatus.LENGTH_REQUIRED, "Content-Length is needed")
            return 0
        length = _declared(request)
        if length < 0:
            raise _Refused(HTTPStatus.BAD_REQUEST, "Content-Length is not a length")
        if length > self.limits.max_body_bytes:
            raise _Refused(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"bodies are at most {self.limits.max_body_bytes} bytes",
            )
        return length

    async def _drain(self, reader: asyncio.StreamReader, length: int) -> None:
        """Read and drop what the client may still be sending of a refused body (a little)."""
        left = min(max(length, 0), DRAIN_BYTES)
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(DRAIN_SECONDS):
                while left > 0 and (chunk := await reader.read(min(left, 65536))):
                    left -= len(chunk)

    async def _send(
        self, writer: asyncio.StreamWriter, answer: Response, request: Request | None
    ) -> None:
        lines = [
            f"HTTP/1.1 {answer.status.value} {answer.status.phrase}",
            f"Server: {self._server_name}",
            f"Date: {formatdate(usegmt=True)}",
            "Connection: close",
            f"Content-Length: {len(answer.body)}",
            "X-Content-Type-Options: nosniff",
            "Cache-Control: no-store",
        ]
        if answer.body:
            lines.append(f"Content-Type: {answer.content_type}")
        extra = answer.headers + (self._headers_for(request) if request is not None else ())
        lines += [f"{name}: {value}" for name, value in extra]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + answer.body)
        try:
            async with asyncio.timeout(self.limits.write_timeout_seconds):
                await writer.drain()
        except TimeoutError:
            raise ConnectionAbortedError("the client does not take its answer") from None
        if writer.can_write_eof():
            writer.write_eof()
        # The request line and status only: never a body, never a header's value.
        peer = writer.get_extra_info("peername")
        shown = f"{request.method} {request.path} HTTP/1.1" if request is not None else "-"
        self._log.info(
            '%s "%s" %d %d',
            peer[0] if isinstance(peer, tuple) else "-",
            shown,
            answer.status.value,
            len(answer.body),
        )


def _parse_head(head: bytes) -> Request:
    lines = head.decode("latin-1").lstrip("\r\n").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _Refused(HTTPStatus.BAD_REQUEST, "not an HTTP/1.x request line")
    method, target, _ = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or line[0] in " \t":
            raise _Refused(HTTPStatus.BAD_REQUEST, "a header line is not `Name: value`")
        key, value = name.lower(), value.strip()
        if key in headers:
            if key == "content-length" and headers[key] != value:
                raise _Refused(HTTPStatus.BAD_REQUEST, "two different Content-Lengths")
            value = headers[key] if key == "content-length" else f"{headers[key]}, {value}"
        headers[key] = value
    return Request(method, target, headers)


def _declared(request: Request) -> int:
    value = request.headers.get("content-length", "0")
    return int(value) if value.isdigit() and len(value) < 19 else -1


def _error_body(message: str) -> bytes:
    return json.dumps({"error": message}).encode()
