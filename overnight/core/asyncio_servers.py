"""Closing an asyncio server without leaking the connections it was accepting.

On Python 3.11 `Server.close()` drops its sockets at once, while the connections it accepted
in the same loop turn are still being set up (one task each): each of those tasks then fails
(`AssertionError` in `Server._attach`, logged as "Error on transport creation") and leaves its
accepted socket unclosed, to be collected later, as an unraisable `ResourceWarning`, in
whatever runs then. Stopping the accepts first and letting those tasks run avoids it.
"""

from __future__ import annotations

import asyncio

# Loop turns an accepted connection takes to reach its handler (accept task, transport,
# connection_made).
_SETUP_TURNS = 3


async def close_server(server: asyncio.Server) -> None:
    """Stop `server` from accepting, let the connections it has accepted reach their handler,
    then close it."""
    loop = asyncio.get_running_loop()
    for listening in server.sockets:
        loop.remove_reader(listening.fileno())
    for _ in range(_SETUP_TURNS):
        await asyncio.sleep(0)
    server.close()
