"""Where the worker reads agent files (checkpoints, `inspect`, output logs): a few threads of
their own, at most one of them per sandbox.

Agent files are agent bytes. The reads never block (no FIFO is opened, see files.read_inside),
but should one ever take long (a slow disk), it takes a thread of this pool, never one of the
default executor every other step of every run needs, and one sandbox holds at most one of
these threads at a time: its other reads wait their turn, other sandboxes' reads go on.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

READ_THREADS = 4

_pool = ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="overnight-agent-read")
# (event loop, sandbox) -> the lock its reads take turns on, while any is waiting or running.
_turns: dict[tuple[int, str], tuple[asyncio.Lock, int]] = {}


async def read_in_pool(sandbox_id: str, fn: Callable[..., T], *args: object) -> T:
    """`fn(*args)` in the agent-file pool, after this sandbox's earlier reads have ended (in
    their thread: a caller that stops waiting does not free the sandbox's turn)."""
    loop = asyncio.get_running_loop()
    key = (id(loop), sandbox_id)
    lock, users = _turns.get(key, (asyncio.Lock(), 0))
    _turns[key] = (lock, users + 1)
    try:
        await lock.acquire()
    except BaseException:
        _leave(key)
        raise
    done = _pool.submit(functools.partial(fn, *args))
    done.add_done_callback(lambda _: _release_soon(loop, key, lock))
    return await asyncio.wrap_future(done, loop=loop)


def _release_soon(
    loop: asyncio.AbstractEventLoop, key: tuple[int, str], lock: asyncio.Lock
) -> None:
    def release() -> None:
        lock.release()
        _leave(key)

    try:
        loop.call_soon_threadsafe(release)
    except RuntimeError:  # the loop is closed: nobody waits any more
        _turns.pop(key, None)


def _leave(key: tuple[int, str]) -> None:
    lock, users = _turns[key]
    if users <= 1:
        del _turns[key]
    else:
        _turns[key] = (lock, users - 1)
