"""The disk limit of a local sandbox no image holds (`disk: "watch"`, see disk_limit): measured
while the worker watches its agent, and the sandbox paused once its files pass the limit.

A measure walks the sandbox's `workspace/`, `home/` and `tmp/`, and its run's store (a coding
agent's session store, run_store), by file descriptor (disk_measure), following no link and
staying on their filesystem, and adds up the blocks each inode holds (once) and the files and
folders it meets; it stops as soon as either passes its limit, so it costs at most a walk of
the limit's worth of entries (about 0.2 s per 100,000 here). Measures of one sandbox
are spaced by 50 times what the last one cost, at least `MIN_INTERVAL` and at most
`MAX_INTERVAL` apart: a sandbox costs the worker at most 2 % of a core, and one of 100,000
files is measured every 10 s. Past the limit, the sandbox is paused with the reason
`disk limit of N MiB reached (...)`, which its run reads as needing attention (no restart: a
new sandbox would fill the same way). What an agent writes between two measures is over the
limit until the pause: the watch bounds a slow leak, the image (or a filesystem of its own
for `$OVERNIGHT_HOME`) a fast writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from activities.providers.local import run_store
from activities.providers.local.disk_image import FOLDERS
from activities.providers.local.disk_limit import MIB, entries_for
from activities.providers.local.disk_measure import Measure as Measure
from activities.providers.local.disk_measure import measure_roots
from activities.providers.local.engine import LocalEngine
from activities.providers.protocol import ProviderError
from overnight.core.constants import DISK_LIMIT_REASON

MIN_INTERVAL = 10.0
MAX_INTERVAL = 300.0
COST_FACTOR = 50.0
NOT_MEASURED_KEPT = 10_000


def measure(
    folder: Path, limit_bytes: int, limit_entries: int, extra: Sequence[Path] = ()
) -> Measure:
    """What the sandbox's files hold (its folders, and `extra`: its run's store), up to the
    first limit passed."""
    roots = [folder / name for name in FOLDERS] + list(extra)
    return measure_roots(roots, limit_bytes, limit_entries)


def reason_for(mib: int, found: Measure) -> str:
    if found.entries > entries_for(mib):
        detail = f"more than {entries_for(mib):,} files and folders"
    else:
        detail = f"more than {found.bytes // MIB:,} MiB used"
    return f"{DISK_LIMIT_REASON.format(mib=mib)} ({detail})"


def interval_after(found: Measure) -> float:
    return min(MAX_INTERVAL, max(MIN_INTERVAL, found.seconds * COST_FACTOR))


class DiskWatch:
    """One provider's measures: when each watched sandbox is due next."""

    def __init__(self, engine: LocalEngine) -> None:
        self.engine = engine
        self._due: dict[str, float] = {}
        self._busy: set[str] = set()
        # Sandboxes found not measured (an image holds their limit, or none): no task, no
        # thread for their watches (a watch of thousands of runs stays on the event loop).
        self._not_measured: set[str] = set()

    @contextlib.asynccontextmanager
    async def guarding(self, sandbox_id: str) -> AsyncIterator[None]:
        """Measure `sandbox_id` in the background while the block runs (an agent's watch)."""
        if sandbox_id in self._not_measured:
            yield
            return
        task = asyncio.create_task(self._guard(sandbox_id))
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _guard(self, sandbox_id: str) -> None:
        while True:
            wait = self._due.get(sandbox_id, 0.0) - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if sandbox_id in self._busy:  # another watch of it is measuring
                await asyncio.sleep(MIN_INTERVAL)
                continue
            self._busy.add(sandbox_id)
            try:
                again = await asyncio.to_thread(self.check, sandbox_id)
            finally:
                self._busy.discard(sandbox_id)
            if not again:
                return

    def check(self, sandbox_id: str) -> bool:
        """Measure the sandbox if it is a running one the worker measures, pausing it past its
        limit. False: nothing more to measure (not measured, or no longer running)."""
        try:
            meta = self.engine.find(sandbox_id)
        except ProviderError:
            meta = None
        if meta is None or meta.state != "running" or meta.disk != "watch" or not meta.disk_mib:
            self._due.pop(sandbox_id, None)
            if meta is not None and meta.disk != "watch":
                if len(self._not_measured) >= NOT_MEASURED_KEPT:
                    self._not_measured.clear()
                self._not_measured.add(sandbox_id)
            return False
        mib = meta.disk_mib
        stores = run_store.measured(meta.mounts)
        found = measure(self.engine.folder(sandbox_id), mib * MIB, entries_for(mib), stores)
        self._due[sandbox_id] = time.monotonic() + interval_after(found)
        if not found.over:
            return True
        self.engine.pause(sandbox_id, reason=reason_for(mib, found))
        self._due.pop(sandbox_id, None)
        return False
