"""A console that stops ends its live streams, the run page's as the runs list's: a stream
otherwise goes on (it asks for its run's status every 2 s and sends keep-alives) until its
reader leaves, and the server's shutdown waits out its grace for it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from urllib.parse import urlsplit

import pytest
from temporalio.client import Client

from overnight.console import auth
from overnight.console.context import context_for
from overnight.console.server import ConsoleServer
from overnight.console.settings import settings_from
from tests.console.conftest import start_console, tokens
from tests.console.test_console_attacks import reader_session
from tests.waits import CAP

# A chunked body's end: what a stream that ended sends last.
LAST_CHUNK = b"0\r\n\r\n"


@pytest.mark.parametrize("path", ["/runs/no-such-run/events", "/runs/events"])
async def test_a_stopping_console_ends_its_live_streams(dev_client: Client, path: str) -> None:
    async with start_console(dev_client) as console:
        where = urlsplit(console.url)
        reader, writer = await asyncio.open_connection(where.hostname, where.port)
        try:
            cookie = reader_session(console)
            writer.write(
                (
                    f"GET {path} HTTP/1.1\r\nHost: {where.netloc}\r\n"
                    f"Accept: text/event-stream\r\nCookie: {auth.SESSION_COOKIE}={cookie}"
                    "\r\n\r\n"
                ).encode()
            )
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CAP)
            assert head.startswith(b"HTTP/1.1 200"), head
            console.context.stopping.set()
            # A cap, not a bound: before, the run page's stream never ended while its reader
            # stayed. Read in chunks: the runs list's first event holds every run of the
            # session's server, past a line reader's 64 KiB late in a full suite.
            body = await asyncio.wait_for(_until_last_chunk(reader), CAP)
            assert body.endswith(LAST_CHUNK)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


async def _until_last_chunk(reader: asyncio.StreamReader) -> bytes:
    body = b""
    while not body.endswith(LAST_CHUNK):
        chunk = await reader.read(65536)
        if not chunk:
            break
        body += chunk
    return body


def _lifespans() -> list[asyncio.Task[object]]:
    return [task for task in asyncio.all_tasks() if "LifespanOn.main" in repr(task.get_coro())]


async def test_a_console_stopped_at_once_leaves_no_task_in_the_loop(dev_client: Client) -> None:
    """A second stop (the second Ctrl-C) skips the graceful wait, not the app's shutdown: a
    lifespan task left pending holds the runs source in the caller's loop, to be collected
    later in the middle of something else."""
    before = set(_lifespans())
    sock = socket.create_server(("127.0.0.1", 0))
    settings = settings_from(tokens(), address="127.0.0.1", port=sock.getsockname()[1])
    server = ConsoleServer(context_for(dev_client, settings))
    serving = asyncio.create_task(server.serve_on(sock))
    try:
        async with asyncio.timeout(CAP):
            while not server.started:
                assert not serving.done(), serving
                await asyncio.sleep(0.05)
        server.stop()
        server.stop()
        await asyncio.wait_for(serving, CAP)
    finally:
        sock.close()
    assert server.force_exit
    assert set(_lifespans()) - before == set()
