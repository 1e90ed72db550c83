"""A console that stops ends its live streams, the run page's as the runs list's: a stream
otherwise goes on (it asks for its run's status every 2 s and sends keep-alives) until its
reader leaves, and the server's shutdown waits out its grace for it."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import pytest
from temporalio.client import Client

from overnight.console import auth
from tests.console.conftest import start_console
from tests.console.test_console_attacks import reader_session
from tests.waits import CAP

# A chunked body's end: what a stream that ended sends last.
LAST_CHUNK = b"0\r\n\r\n"


@pytest.mark.parametrize("path", ["/runs/no-such-run/events", "/runs/events"])
async def test_a_stopping_console_ends_its_live_streams(dev_client: Client, path: str) -> None:
    async with start_console(dev_client) as console:
        where = urlsplit(console.url)
        reader, writer = await asyncio.open_connection(where.hostname, where.port)
        cookie = reader_session(console)
        writer.write(
            (
                f"GET {path} HTTP/1.1\r\nHost: {where.netloc}\r\n"
                f"Accept: text/event-stream\r\nCookie: {auth.SESSION_COOKIE}={cookie}\r\n\r\n"
            ).encode()
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CAP)
        assert head.startswith(b"HTTP/1.1 200"), head
        console.context.stopping.set()
        # A cap, not a bound: before, the run page's stream never ended while its reader stayed.
        body = await asyncio.wait_for(reader.readuntil(LAST_CHUNK), CAP)
        assert body.endswith(LAST_CHUNK)
        writer.close()
