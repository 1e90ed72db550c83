"""The worker's floor of free space (`OVERNIGHT_MIN_FREE_MIB`, disk_limit) held while its
sandboxes run, not only when one is made.

A create below the floor waits (`LowDiskSpace`); but sandboxes already running can still take
the room the floor keeps for the dev server's database and the other runs: each one's image
is sparse, and a store or a measured sandbox grows until its limit. So while the worker
watches agents, one check per provider (not one per watch: a worker may watch thousands)
looks at the free space of `$OVERNIGHT_HOME`'s filesystem every `INTERVAL` seconds (a
`statvfs`, microseconds), and below the floor pauses every sandbox it watches, with the
reason `HOST_FLOOR_REASON` says. Its run reads that as needing attention in place: nothing
is lost, and once room is made (`overnight reap`, the operator) `overnight extend` wakes the
same agent; woken still below the floor, it is paused again at the next check.

What it does not hold: a sandbox no worker watches (none alive) is not checked, and a writer
faster than the room left passes the floor by what it writes in one interval (each sandbox
still within its own limit).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from activities.providers.local.disk_limit import MIN_FREE_ENV, free_mib, min_free_mib
from activities.providers.local.engine import LocalEngine
from activities.providers.protocol import ProviderError
from overnight.core.constants import HOST_FLOOR_REASON

INTERVAL = 1.0
log = logging.getLogger(__name__)


def below_floor(home: Path, environ: Mapping[str, str] | None = None) -> str | None:
    """The pause reason when `home`'s filesystem has less free than the worker's floor (None:
    there is room, or no floor)."""
    floor = min_free_mib(environ)
    if floor == 0:
        return None
    free = free_mib(home)
    if free >= floor:
        return None
    return HOST_FLOOR_REASON.format(free=free, home=home, floor=floor, setting=MIN_FREE_ENV)


class FloorWatch:
    """One provider's check of the floor, running while any of its sandboxes is watched."""

    def __init__(self, engine: LocalEngine) -> None:
        self.engine = engine
        self._watched: Counter[str] = Counter()
        self._task: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def guarding(self, sandbox_id: str) -> AsyncIterator[None]:
        """Hold the floor for `sandbox_id` while the block runs (an agent's watch)."""
        self._watched[sandbox_id] += 1
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())
        try:
            yield
        finally:
            self._watched[sandbox_id] -= 1
            if self._watched[sandbox_id] <= 0:
                del self._watched[sandbox_id]
            if not self._watched and self._task is not None:
                self._task.cancel()  # nothing watched: no check until a watch begins again
                self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.check()
            except Exception as error:  # a check that fails is tried again, never fatal
                log.warning("the floor of free space could not be checked: %s", error)
            await asyncio.sleep(INTERVAL)

    async def check(self) -> list[str]:
        """Pause every watched sandbox that runs, when the host is below the floor; the ids
        paused now."""
        reason = below_floor(self.engine.home)
        if reason is None:
            return []
        paused = []
        for sandbox_id in list(self._watched):
            if await asyncio.to_thread(self._pause, sandbox_id, reason):
                paused.append(sandbox_id)
        return paused

    def _pause(self, sandbox_id: str, reason: str) -> bool:
        try:
            meta = self.engine.find(sandbox_id)
            if meta is None or meta.state != "running":
                return False
            return self.engine.pause(sandbox_id, reason=reason).state == "paused"
        except ProviderError as error:
            log.warning("sandbox %s below the floor not paused: %s", sandbox_id, error)
            return False
