"""What the local provider costs a worker: its looks and checkpoint reads, counted per sandbox.

`CountingEngine` is the real `LocalEngine`, counting each call that costs the worker a look at
a sandbox or a read of a file: `stamp` (a stat of the checkpoint: one per look of overnight's
polling watch), `process` (the agent's state), `read_file` (a checkpoint read, and the bytes
it returned). A benchmark worker (`bench.worker_main --counts-file`) writes the counts to a
JSON file every `DUMP_SECONDS`; `read_counts` reads them back.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from activities.providers.local.engine import LocalEngine
from activities.providers.local.procs import ProcessRecord
from activities.providers.protocol import FileRead

DUMP_SECONDS = 0.5
Counts = dict[str, dict[str, int]]  # sandbox id -> {"stamp", "process", "read", "read_bytes"}


class CountingEngine(LocalEngine):
    def __init__(self, home: Path | str | None = None):
        super().__init__(home)
        self._lock = threading.Lock()
        self._counts: dict[str, Counter[str]] = {}

    def _add(self, sandbox_id: str, what: str, amount: int = 1) -> None:
        with self._lock:
            self._counts.setdefault(sandbox_id, Counter())[what] += amount

    def counts(self) -> Counts:
        with self._lock:
            return {sid: dict(counter) for sid, counter in self._counts.items()}

    def stamp(self, sandbox_id: str, path: str) -> str:
        self._add(sandbox_id, "stamp")
        return super().stamp(sandbox_id, path)

    def process(self, sandbox_id: str, process_id: str) -> ProcessRecord | None:
        self._add(sandbox_id, "process")
        return super().process(sandbox_id, process_id)

    def read_file(self, sandbox_id: str, path: str, max_bytes: int) -> FileRead:
        read = super().read_file(sandbox_id, path, max_bytes)
        self._add(sandbox_id, "read")
        self._add(sandbox_id, "read_bytes", len(read.data or b""))
        return read


async def dump_counts(engine: CountingEngine, path: Path) -> None:
    """Write the engine's counts to `path` (atomically) every DUMP_SECONDS, until cancelled."""
    while True:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(engine.counts()))
        os.replace(tmp, path)
        await asyncio.sleep(DUMP_SECONDS)


def read_counts(path: Path) -> Counts:
    try:
        value: Any = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
