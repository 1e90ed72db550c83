"""The model routes benchmark's client (bench/model_routes.py): `concurrent` connections kept
open, each sending `each` requests in turn, timing every answer: to its last byte (a whole
answer) or to its first byte of body (a stream's first event). HTTP/1.1 by hand on asyncio
streams, so that the client's own cost is small and the same for both paths."""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field


@dataclass
class Timings:
    seconds: list[float] = field(default_factory=list)
    failed: int = 0


def request_bytes(port: int, path: str, headers: dict[str, str], body: dict[str, object]) -> bytes:
    data = json.dumps(body).encode()
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


async def _one(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes, first_byte: bool
) -> float:
    began = time.perf_counter()
    writer.write(request)
    await writer.drain()
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
    if not head.startswith("http/1.1 200"):
        raise ConnectionError(head.split("\r\n", 1)[0])
    if "transfer-encoding: chunked" in head:
        took = None
        while size := int((await reader.readline()).split(b";")[0].strip() or b"0", 16):
            await reader.readexactly(size + 2)
            took = took if took is not None else time.perf_counter() - began
        await reader.readline()
        if first_byte and took is not None:
            return took
    else:
        length = int(head.split("content-length:", 1)[1].split("\r\n", 1)[0])
        await reader.readexactly(length)
    return time.perf_counter() - began


async def _connection(
    port: int, request: bytes, each: int, first_byte: bool, found: Timings, think: float
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    try:
        for _ in range(each):
            if think:  # an agent's tool runs between its model calls
                await asyncio.sleep(random.uniform(0, 2 * think))
            try:
                found.seconds.append(await _one(reader, writer, request, first_byte))
            except (ConnectionError, asyncio.IncompleteReadError, ValueError):
                found.failed += 1
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    finally:
        writer.close()


def run(
    port: int, request: bytes, concurrent: int, each: int, first_byte: bool, think: float = 0.0
) -> Timings:
    """Every connection's timings, in seconds. `think`: each connection waits a random time
    (0 to twice this, seconds) before each call, as an agent runs its tools between model
    calls; 0: back to back."""
    found = Timings()

    async def main() -> None:
        await asyncio.gather(
            *(_connection(port, request, each, first_byte, found, think) for _ in range(concurrent))
        )

    asyncio.run(main())
    return found
