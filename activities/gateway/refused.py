"""The book of refused connections: per sandbox, per host name asked for, how many. Kept in
the gateway's memory and written (atomically, at most once a second) beside its key, where
the run's observe step reads it for the status (`refused_counts`)."""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from pathlib import Path

FOLDER = "refused"
# A hostile agent may ask for endless names: the book keeps this many a sandbox, and counts
# the rest under one.
MAX_NAMES = 200
OTHERS = "(other names)"


class RefusalBook:
    def __init__(self, folder: Path) -> None:
        self._folder = folder / FOLDER
        self._counts: dict[str, Counter[str]] = {}
        self._dirty: set[str] = set()
        self._lock = threading.Lock()
        self._flushing = threading.Lock()

    def count(self, sandbox: str, host: str) -> None:
        with self._lock:
            counts = self._counts.get(sandbox)
            if counts is None:
                counts = self._counts[sandbox] = Counter(refused_counts(self._folder, sandbox))
            if host not in counts and len(counts) >= MAX_NAMES:
                host = OTHERS
            counts[host] += 1
            self._dirty.add(sandbox)

    def flush(self) -> None:
        # One writer at a time: a flush that returns has written everything counted before it.
        with self._flushing:
            with self._lock:
                dirty = {name: dict(self._counts[name]) for name in self._dirty}
                self._dirty.clear()
            self._write(dirty)

    def _write(self, dirty: dict[str, dict[str, int]]) -> None:
        if dirty:
            self._folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        for name, counts in dirty.items():
            path = self._folder / f"{name}.json"
            temporary = path.with_suffix(".tmp")
            temporary.write_text(json.dumps(counts, sort_keys=True))
            os.replace(temporary, path)


def refused_counts(folder: Path, sandbox: str) -> dict[str, int]:
    """What the book says of `sandbox` (`folder`: the gateway's `refused` folder); empty when
    nothing was refused or the book cannot be read."""
    try:
        found = json.loads((folder / f"{sandbox}.json").read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(k): int(v) for k, v in found.items() if isinstance(v, int) and v > 0}
