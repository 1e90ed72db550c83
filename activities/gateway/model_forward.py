"""The model routes' client of the upstream: HTTP/1.1 over asyncio streams (TLS for https
with the system's trust store), the answer's body handed on as it comes (chunked framing
taken off), connections kept open and used again per host (a TLS handshake per request
would add a round trip or two to every model call).

A connection taken from the pool may have been closed by the upstream meanwhile: a request
on it that gets no answer at all is sent again once on a new connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from activities.gateway import http_wire

CONNECT_SECONDS = 10.0
# A model may think for minutes before its first byte, and between events.
ANSWER_SECONDS = 900.0
IDLE_SECONDS = 30.0
MAX_IDLE_PER_HOST = 32
MAX_HEAD = 64 * 1024
CHUNK = 256 * 1024


class UpstreamFailed(Exception):
    """No answer: the upstream could not be reached, or closed before its answer's head."""


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    tls: bool
    path: str  # with its query

    @property
    def key(self) -> tuple[str, int, bool]:
        return (self.host, self.port, self.tls)

    @property
    def host_header(self) -> str:
        default = 443 if self.tls else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"


def target_of(base: str, vendor_path: str, query: str) -> Target:
    """Where `vendor_path` (`/v1/messages`, ...) is under the base URL `base`: a base ending
    in `/v1` (OpenAI's convention) is the same as one without."""
    url = urlsplit(base)
    tls = url.scheme == "https"
    prefix = url.path.rstrip("/").removesuffix("/v1")
    path = prefix + vendor_path + (f"?{query}" if query else "")
    return Target(url.hostname or "", url.port or (443 if tls else 80), tls, path)


@dataclass
class _Idle:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    since: float


@dataclass
class Pool:
    idle: dict[tuple[str, int, bool], list[_Idle]] = field(default_factory=dict)
    _tls: ssl.SSLContext | None = None

    async def open(self, target: Target) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bool]:
        """A connection to `target`: an idle one (True) or a new one (False)."""
        kept = self.idle.get(target.key, [])
        while kept:
            idle = kept.pop()
            if time.monotonic() - idle.since < IDLE_SECONDS and not idle.reader.at_eof():
                return idle.reader, idle.writer, True
            idle.writer.close()
        context = None
        if target.tls:
            self._tls = self._tls or ssl.create_default_context()
            context = self._tls
        try:
            async with asyncio.timeout(CONNECT_SECONDS):
                reader, writer = await asyncio.open_connection(
                    target.host, target.port, ssl=context, limit=CHUNK
                )
        except (OSError, TimeoutError) as error:
            raise UpstreamFailed(f"cannot reach {target.host}:{target.port} ({error})") from None
        return reader, writer, False

    def release(
        self, target: Target, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        kept = self.idle.setdefault(target.key, [])
        if len(kept) >= MAX_IDLE_PER_HOST:
            writer.close()
            return
        kept.append(_Idle(reader, writer, time.monotonic()))


@dataclass
class Answer:
    """An upstream answer whose head was read; its body is read with `chunks` or `read_all`
    (once), after which the connection goes back to the pool when it may."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    length: int | None
    chunked: bool
    keep: bool
    _target: Target
    _pool: Pool
    _reader: asyncio.StreamReader
    _writer: asyncio.StreamWriter
    _done: bool = False
    _closed: bool = False
    # Set while `chunks` hands on the answer's last bytes (known from its framing).
    ending: bool = False

    def header(self, name: str) -> str:
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return ""

    async def chunks(self) -> AsyncIterator[bytes]:
        reader = self._reader
        try:
            if self.chunked:
                body = http_wire.ChunkedBody()
                while not body.done:
                    async with asyncio.timeout(ANSWER_SECONDS):
                        data = await reader.read(CHUNK)
                    if not data:
                        raise asyncio.IncompleteReadError(b"", None)
                    payload = body.feed(data)
                    self.ending = body.done
                    if payload:
                        yield payload
                if body.extra:
                    self.keep = False  # bytes no request asked for: not used again
            elif self.length is not None:
                left = self.length
                while left > 0:
                    async with asyncio.timeout(ANSWER_SECONDS):
                        data = await reader.read(min(CHUNK, left))
                    if not data:
                        raise asyncio.IncompleteReadError(b"", left)
                    left -= len(data)
                    self.ending = not left
                    yield data
            else:
                self.keep = False
                while True:
                    async with asyncio.timeout(ANSWER_SECONDS):
                        data = await reader.read(CHUNK)
                    if not data:
                        break
                    yield data
            self._done = True
        finally:
            self.close()

    async def read_all(self, limit: int) -> bytes:
        data = b""
        async for chunk in self.chunks():
            if len(data) < limit:
                data += chunk[: limit - len(data)]
        return data

    def close(self) -> None:
        """Give the connection back (the whole answer was read) or close it; once."""
        if self._closed:
            return
        self._closed = True
        if self._done and self.keep:
            self._pool.release(self._target, self._reader, self._writer)
        else:
            self._writer.close()


async def request(
    pool: Pool, target: Target, method: str, headers: list[tuple[str, str]], body: bytes
) -> Answer:
    """Send one request and read its answer's head. UpstreamFailed when none came."""
    for _ in range(2):
        reader, writer, reused = await pool.open(target)
        lines = [f"{method} {target.path} HTTP/1.1", f"Host: {target.host_header}"]
        lines += [f"{k}: {v}" for k, v in headers]
        lines += [f"Content-Length: {len(body)}", "Connection: keep-alive"]
        try:
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            await writer.drain()
            async with asyncio.timeout(ANSWER_SECONDS):
                head = await reader.readuntil(b"\r\n\r\n")
        except (
            OSError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            TimeoutError,
        ) as error:
            writer.close()
            if reused and not isinstance(error, TimeoutError):
                continue  # the upstream had closed the idle connection
            raise UpstreamFailed(f"{target.host}: {type(error).__name__} {error}".strip()) from None
        return _answer(head, target, pool, reader, writer)
    raise UpstreamFailed(f"{target.host}: closed without answering")


def _answer(
    head: bytes,
    target: Target,
    pool: Pool,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> Answer:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    try:
        status = int(parts[1])
    except (IndexError, ValueError):
        writer.close()
        raise UpstreamFailed(f"{target.host}: not an HTTP answer") from None
    headers = []
    for line in lines[1:]:
        if ":" in line:
            key, _, value = line.partition(":")
            headers.append((key.strip(), value.strip()))
    named = {k.lower(): v for k, v in headers}
    chunked = "chunked" in named.get("transfer-encoding", "").lower()
    length = None
    if not chunked and named.get("content-length", "").isdigit():
        length = int(named["content-length"])
    keep = named.get("connection", "").lower() != "close" and (chunked or length is not None)
    return Answer(
        status,
        parts[2] if len(parts) > 2 else "",
        headers,
        length,
        chunked,
        keep,
        target,
        pool,
        reader,
        writer,
    )


async def close_all(pool: Pool) -> None:
    for kept in pool.idle.values():
        for idle in kept:
            idle.writer.close()
            with contextlib.suppress(Exception):
                await idle.writer.wait_closed()
    pool.idle.clear()
