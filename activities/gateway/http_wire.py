"""HTTP/1.1 as the gateway reads and writes it to a sandbox: a request's head, its body
(`Content-Length` or chunked), an answer's head and its body framed chunked or whole."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    413: "Content Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
}


# The most of a body read at once.
CHUNK = 256 * 1024


class BodyTooLarge(Exception):
    pass


def parse_head(head: bytes) -> tuple[str, str, list[tuple[str, str]]]:
    """(method, target, headers) of a request's head; ConnectionError when it is none."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise ConnectionError("not an HTTP request")
    headers = []
    for line in lines[1:]:
        if ":" in line:
            key, _, value = line.partition(":")
            headers.append((key.strip(), value.strip()))
    return parts[0].upper(), parts[1], headers


async def iter_body(
    reader: asyncio.StreamReader, headers: dict[str, str], limit: int | None = None
) -> AsyncIterator[bytes]:
    """The request's body as it comes (`headers` lower-cased), chunked framing taken off;
    BodyTooLarge past `limit` bytes, said before they are read."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        size_so_far = 0
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()).strip():
                    pass
                return
            size_so_far += size
            if limit is not None and size_so_far > limit:
                raise BodyTooLarge
            yield await reader.readexactly(size)
            await reader.readexactly(2)
    length = headers.get("content-length", "0").strip() or "0"
    if not length.isdigit():
        raise ConnectionError("a bad Content-Length")
    left = int(length)
    if limit is not None and left > limit:
        raise BodyTooLarge
    while left > 0:
        data = await reader.read(min(CHUNK, left))
        if not data:
            raise asyncio.IncompleteReadError(b"", left)
        left -= len(data)
        yield data


async def read_body(reader: asyncio.StreamReader, headers: dict[str, str], limit: int) -> bytes:
    """The request's whole body (`headers` lower-cased); BodyTooLarge past `limit` bytes."""
    return b"".join([data async for data in iter_body(reader, headers, limit)])


def answer_head(
    status: int, reason: str, headers: Sequence[tuple[str, str]], length: int | None, keep: bool
) -> bytes:
    """An answer's head: `Content-Length: length`, or chunked when `length` is None."""
    lines = [f"HTTP/1.1 {status} {reason or REASONS.get(status, '')}".rstrip()]
    lines += [f"{k}: {v}" for k, v in headers]
    lines.append("Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}")
    lines.append("Connection: keep-alive" if keep else "Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n" if data else b""


LAST_CHUNK = b"0\r\n\r\n"


# The longest chunk-size or trailer line taken.
MAX_LINE = 8 * 1024


class ChunkedBody:
    """Chunked framing taken off a body as its bytes come, whatever their cuts: `feed` returns
    the payload they carry (several chunks' at once when they came together, so an answer's
    events that arrived in one read go on in one write); `done` once the last chunk and the
    trailers were read; `extra`: bytes past the body's end."""

    def __init__(self) -> None:
        self._rest = b""
        self._left = 0  # payload bytes left in the current chunk
        self._crlf = b""  # the part of a chunk's closing CRLF still to come
        self._trailers = False
        self.done = False
        self.extra = b""

    def feed(self, data: bytes) -> bytes:
        buf = self._rest + data if self._rest else data
        out: list[bytes] = []
        i, end = 0, len(buf)
        while i < end and not self.done:
            if self._left:
                take = min(self._left, end - i)
                out.append(buf[i : i + take])
                i += take
                self._left -= take
                if not self._left:
                    self._crlf = b"\r\n"
            elif self._crlf:
                take = min(len(self._crlf), end - i)
                if buf[i : i + take] != self._crlf[:take]:
                    raise ValueError("a chunk not ended by CRLF")
                self._crlf = self._crlf[take:]
                i += take
            else:
                j = buf.find(b"\r\n", i)
                if j < 0:
                    break
                line = buf[i:j]
                i = j + 2
                if self._trailers:
                    self.done = not line
                    continue
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size < 0:
                    raise ValueError("a negative chunk size")
                if size:
                    self._left = size
                else:
                    self._trailers = True
        self._rest = buf[i:]
        if self.done:
            self.extra, self._rest = self._rest, b""
        elif len(self._rest) > MAX_LINE:
            raise ValueError("a chunk-size or trailer line too long")
        return b"".join(out) if len(out) != 1 else out[0]
