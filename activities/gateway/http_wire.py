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
