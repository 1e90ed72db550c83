"""A gateway stopped while connections arrive ends each of them: none is left with its socket
unclosed, and asyncio logs no error for it.

Seen in CI: the unraisable warnings of a gateway's connection (`unclosed transport`, `coroutine
Proxy.handle ignored GeneratorExit`) failed whichever test ran when they were collected. Under
Python 3.11 `Server.close` fails the accepts still in flight (their socket left unclosed), and
`asyncio.run` cancels the handlers it finds once, each one then logged by asyncio's streams as
"Exception in callback" (thousands a stop under this test's load).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import socket
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from activities.gateway.service import Gateway

ROUNDS = 12


def dial(port: int, stop: threading.Event, clients: list[socket.socket]) -> None:
    while not stop.is_set():
        try:
            client = socket.create_connection(("127.0.0.1", port), timeout=1)
        except OSError:
            continue  # the gateway has stopped listening
        clients.append(client)
        with contextlib.suppress(OSError):  # reset: the gateway stopped
            client.sendall(b"GET ")  # a head begun, never ended: its handler waits


def test_connections_open_and_arriving_as_the_gateway_stops_are_all_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    unraisable: list[str] = []

    def kept(seen: SimpleNamespace) -> None:
        unraisable.append(f"{seen.exc_type.__name__}: {seen.object!r}")

    monkeypatch.setattr(sys, "unraisablehook", kept)
    caplog.set_level(logging.ERROR, logger="asyncio")
    opened = 0
    for round_ in range(ROUNDS):
        gateway = Gateway(tmp_path / f"home-{round_}")
        port = gateway.start()
        stop = threading.Event()
        clients: list[socket.socket] = []

        dialer = threading.Thread(target=dial, args=(port, stop, clients))
        dialer.start()
        while len(clients) < 20:  # connections open, and more coming, as it stops
            threading.Event().wait(0.01)
        gateway.stop()
        stop.set()
        dialer.join()
        opened += len(clients)
        for client in clients:
            client.close()
        gc.collect()
    assert opened > ROUNDS * 20
    assert unraisable == []
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
