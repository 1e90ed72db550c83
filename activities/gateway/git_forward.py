"""An origin at an http(s) URL, reached for the sandbox by the gateway (git_http.py serves the
route and reads each push first): the request carried to the origin with the worker's
credential for it (`RunSpec.repo_credential`, from the worker's environment: never the
sandbox's), its body in chunks as it comes, the answer as the origin sends it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import ssl
from collections.abc import AsyncIterator
from urllib.parse import unquote, urlsplit

from activities.gateway.http_wire import LAST_CHUNK, chunk
from activities.gateway.origin import Origin

CHUNK = 256 * 1024
CONNECT_SECONDS = 10.0
ANSWER_SECONDS = 3600.0


class ForwardFailed(Exception):
    """The origin could not be reached or answered no HTTP."""


# Headers of git's requests the origin needs; nothing else of the sandbox's is sent (its
# `Authorization` is the gateway's token, not the origin's). The answer's framing
# (`Content-Length` or chunks) is carried as the origin sent it.
_FORWARDED = ("content-type", "content-encoding", "accept", "git-protocol", "user-agent")
_RETURNED = (
    "content-type",
    "content-encoding",
    "content-length",
    "transfer-encoding",
    "cache-control",
    "expires",
    "pragma",
)


async def forward(
    origin: Origin,
    method: str,
    rest: str,
    query: str,
    headers: dict[str, str],
    first: bytes,
    body: AsyncIterator[bytes],
    writer: asyncio.StreamWriter,
) -> None:
    """Carry one smart-HTTP request to the origin's URL, with the worker's credential: the
    request's body in chunks as it comes, the answer as the origin sends it."""
    url = urlsplit(origin.url)
    host = url.hostname or ""
    secure = url.scheme == "https"
    path = url.path.rstrip("/") + "/" + rest + (f"?{query}" if query else "")
    sent = {k: v for k, v in headers.items() if k in _FORWARDED}
    credential = os.environ.get(origin.credential_env, "") if origin.credential_env else ""
    if credential:
        pair = f"x-access-token:{credential}"
    elif url.username:  # a credential the spec's URL carries, the worker's as much as the spec's
        pair = f"{unquote(url.username)}:{unquote(url.password or '')}"
    else:
        pair = ""
    if pair:
        sent["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    sent["host"] = url.netloc.rpartition("@")[2]
    sent["connection"] = "close"
    if method == "POST":
        sent["transfer-encoding"] = "chunked"
    try:
        up_reader, up_writer = await asyncio.wait_for(
            asyncio.open_connection(
                host,
                url.port or (443 if secure else 80),
                ssl=ssl.create_default_context() if secure else None,
                limit=CHUNK,
            ),
            CONNECT_SECONDS,
        )
    except (OSError, TimeoutError) as error:
        raise ForwardFailed(f"overnight gateway: {host}: {error}") from None
    try:
        lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in sent.items())]
        up_writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if method == "POST":
            await _send_chunked(up_writer, first, body)
        await up_writer.drain()
        head = await asyncio.wait_for(up_reader.readuntil(b"\r\n\r\n"), ANSWER_SECONDS)
        writer.write(_returned_head(head))
        while data := await up_reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as error:
        raise ForwardFailed(f"overnight gateway: {host}: {error}") from None
    finally:
        up_writer.close()
        with contextlib.suppress(Exception):
            await up_writer.wait_closed()


async def _send_chunked(
    sink: asyncio.StreamWriter, first: bytes, body: AsyncIterator[bytes]
) -> None:
    sink.write(chunk(first))
    async for data in body:
        sink.write(chunk(data))
        await sink.drain()
    sink.write(LAST_CHUNK)


def _returned_head(head: bytes) -> bytes:
    """The origin's answer head, with only what git needs of it, closing."""
    lines = head.decode("latin-1").split("\r\n")
    kept = [lines[0]]
    for line in lines[1:]:
        name = line.partition(":")[0].strip().lower()
        if name in _RETURNED:
            kept.append(line)
    if " 401 " in f"{lines[0]} ":
        # The origin refused the worker's credential (the sandbox's token was good).
        kept.append('WWW-Authenticate: Basic realm="overnight git origin"')
    kept.append("Connection: close")
    return ("\r\n".join(kept) + "\r\n\r\n").encode("latin-1")
