"""The book of refused connections: per sandbox, per host name asked for, how many. Counted in
the gateway's memory and added (at most once a second, under a lock of the file's folder) to
a file beside its key, where the run's observe step reads it for the status
(`refused_counts`). Every gateway of the host adds to the same files: several may serve one
port (service.py), and none overwrites another's counts."""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections import Counter
from pathlib import Path

FOLDER = "refused"
LOCK = ".lock"
# A hostile agent may ask for endless names: the book keeps this many a sandbox, and counts
# the rest under one.
MAX_NAMES = 200
OTHERS = "(other names)"


class RefusalBook:
    def __init__(self, folder: Path) -> None:
        self._folder = folder / FOLDER
        # Counted since the last flush, not yet in the files.
        self._pending: dict[str, Counter[str]] = {}
        self._lock = threading.Lock()
        self._flushing = threading.Lock()

    def count(self, sandbox: str, host: str) -> None:
        with self._lock:
            self._pending.setdefault(sandbox, Counter())[host] += 1

    def flush(self) -> None:
        # One flush at a time: a flush that returns has written everything counted before it.
        with self._flushing:
            with self._lock:
                pending, self._pending = self._pending, {}
            if pending:
                self._add(pending)

    def _add(self, pending: dict[str, Counter[str]]) -> None:
        self._folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self._folder / LOCK, "ab") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            for name, added in pending.items():
                counts = Counter(refused_counts(self._folder, name))
                for host, n in added.items():
                    if host not in counts and len(counts) >= MAX_NAMES:
                        host = OTHERS
                    counts[host] += n
                path = self._folder / f"{name}.json"
                temporary = path.with_suffix(".tmp")
                temporary.write_text(json.dumps(dict(counts), sort_keys=True))
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
