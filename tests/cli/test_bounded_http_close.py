"""The bounded HTTP server (the codec server's) closed as it accepts connections closes each of
them: none is left with its socket unclosed, and asyncio logs no error for it (Python 3.11's
`Server.close` fails the accepts in flight: overnight/core/asyncio_servers.py)."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import sys
from http import HTTPStatus
from types import SimpleNamespace

import pytest

from overnight.cli.bounded_http import BoundedHttpServer, Limits, Request, Response

ROUNDS = 5
CONNECTIONS = 20


def answer(request: Request) -> Response:
    return Response(HTTPStatus.OK, b"{}")


async def close_with_accepts_in_flight(clients: list[socket.socket]) -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setblocking(False)
    server = BoundedHttpServer(sock, answer, limits=Limits())
    await server.start()
    for _ in range(CONNECTIONS):  # in the listener's backlog, none accepted yet
        client = socket.create_connection(sock.getsockname())
        client.sendall(b"GET ")  # a head begun, never ended: its handler waits
        clients.append(client)
    # One turn: the listener's accepts run after this task's step and start a task each;
    # the next turn runs this task's step first, so close meets those accepts in flight.
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    await server.close()
    sock.close()


def test_connections_accepted_as_it_closes_are_all_closed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    unraisable: list[str] = []

    def kept(seen: SimpleNamespace) -> None:
        unraisable.append(f"{seen.exc_type.__name__}: {seen.object!r}")

    monkeypatch.setattr(sys, "unraisablehook", kept)
    caplog.set_level(logging.ERROR, logger="asyncio")
    for _ in range(ROUNDS):
        clients: list[socket.socket] = []
        asyncio.run(close_with_accepts_in_flight(clients))
        for client in clients:
            client.close()
        gc.collect()
    assert unraisable == []
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
