"""The console under uvicorn: one server for `overnight console` and the tests alike.

uvicorn's own signal handling is left out: whoever runs the server stops it (`stop()`), which
first ends the live streams (they would hold the shutdown until its grace ran out) and on a
second call stops at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from overnight.console.app import build_app
from overnight.console.context import ConsoleContext

GRACE_SECONDS = 5
# A new connection has this long to send a whole request's head; then it is closed (uvicorn
# waits for ever: connections that never finish a request would hold a socket each for good).
HEAD_SECONDS = 10.0


class HeadInTime(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, closing a connection with no request begun in time."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.loop.call_later(HEAD_SECONDS, self._head_late)

    def _head_late(self) -> None:
        if self.cycle is None and not self.transport.is_closing():
            self.transport.close()


class ConsoleServer(uvicorn.Server):
    def __init__(self, context: ConsoleContext) -> None:
        self.context = context
        super().__init__(
            uvicorn.Config(
                build_app(context),
                http=HeadInTime,
                # The peer address is the one auth checks a proxy by: never one a header claims.
                proxy_headers=False,
                server_header=False,
                log_level="warning",
                access_log=False,
                timeout_graceful_shutdown=GRACE_SECONDS,
            )
        )

    async def serve_on(self, sock: socket.socket) -> None:
        await self.serve(sockets=[sock])
        if self.force_exit and self.started:
            # uvicorn skips the app's shutdown on a forced exit, and its task, holding the
            # runs source, would stay pending in this loop (collected later, mid-something
            # else, as "coroutine ignored GeneratorExit"). A bounded shutdown instead.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(GRACE_SECONDS):
                    await self.lifespan.shutdown()

    def stop(self) -> None:
        """End the live streams, then shut down gracefully; a second call: at once."""
        if self.should_exit:
            self.force_exit = True
        self.context.stopping.set()
        self.should_exit = True

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
