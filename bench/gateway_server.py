"""The loopback HTTP server of the gateway benchmark: `python -m bench.gateway_server FILE
ADDRESS...`, run in a process of its own so that its CPU is not the gateway's (the gateway runs
in the benchmark's process).

It listens on one port on each ADDRESS (127.0.0.1 first), prints that port, and answers every
request on a new connection and then closes it: `GET /file` with FILE's bytes (sent by the
kernel, `sendfile`, so the server costs next to nothing in a download), anything else with
`ok`. Standard library only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys

HEAD_LIMIT = 16 * 1024
OK_BODY = b"ok"


def _listen(address: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


async def _answer(path: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return
    target = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b"/"
    if target.endswith(b"/file"):
        size = os.path.getsize(path)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
            + f"Content-Length: {size}\r\nConnection: close\r\n\r\n".encode()
        )
        await writer.drain()
        with open(path, "rb") as file:
            await asyncio.get_running_loop().sendfile(writer.transport, file)
    else:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
            + f"Content-Length: {len(OK_BODY)}\r\nConnection: close\r\n\r\n".encode()
            + OK_BODY
        )
        await writer.drain()


async def serve(path: str, addresses: list[str]) -> None:
    first = _listen(addresses[0], 0)
    port = first.getsockname()[1]
    sockets = [first, *(_listen(address, port) for address in addresses[1:])]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _answer(path, reader, writer)
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    servers = [
        await asyncio.start_server(handle, sock=sock, limit=HEAD_LIMIT, backlog=1024)
        for sock in sockets
    ]
    print(port, flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


def main(argv: list[str]) -> int:
    path, addresses = argv[1], argv[2:] or ["127.0.0.1"]
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(path, addresses))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
