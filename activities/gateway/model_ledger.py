"""The model routes' books, per run, on disk under the gateway's folder:

- `spend/<run_id>.jsonl`: one line per answer the gateway forwarded (its request id, route,
  model, usage, USD, whether it was whole), appended under a lock as each answer ends, so a
  worker restart loses none that ended; `spend_in` sums it.
- `spend/<run_id>.stats.json`: the upstream errors retried (`retries`, `last_upstream_error`
  and its time `last_upstream_error_at`), the requests refused at the cap (`cap_refusals`),
  and loop evidence (`repeats`: how many requests in a row carried the same body, by its
  SHA-256 `last_body`). Counted in memory and added to the file at most once a second (the
  gateway's flush), under a lock, by every gateway of the host alike: none overwrites
  another's counts.

Every gateway of a home appends to the same ledger; each reads what the others appended when
it checks a run's cap (`spent`), from where it last read.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FOLDER = "spend"
LOCK = ".lock"
# Ledgers kept open at once (a host runs far fewer runs).
MAX_OPEN = 256


@dataclass
class _Tally:
    ino: int = 0
    offset: int = 0
    usd: float = 0.0
    requests: int = 0


@dataclass
class _Pending:
    retries: int = 0
    cap_refusals: int = 0
    last_error: str = ""
    last_error_at: float = 0.0
    repeats: int = 0
    last_body: str = ""
    changed: bool = False


@dataclass
class ModelBook:
    folder: Path  # the gateway's folder
    _tallies: dict[str, _Tally] = field(default_factory=dict)
    _pending: dict[str, _Pending] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _flushing: threading.Lock = field(default_factory=threading.Lock)
    # Each run's ledger kept open for appending (a model call's booking is one locked write,
    # not a mkdir, an open and a close); reopened when reaping unlinked it.
    _open: dict[str, int] = field(default_factory=dict)

    @property
    def spend_folder(self) -> Path:
        return self.folder / FOLDER

    def book(self, run_id: str, line: dict[str, Any]) -> None:
        """Append one answer's line to the run's ledger (at once: it is money)."""
        data = (json.dumps(line, sort_keys=True) + "\n").encode()
        with self._lock:
            fd = self._ledger(run_id)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                os.write(fd, data)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _ledger(self, run_id: str) -> int:
        fd = self._open.get(run_id)
        if fd is not None:
            if os.fstat(fd).st_nlink > 0:
                return fd
            os.close(fd)  # reaped (unlinked): a new ledger
            del self._open[run_id]
        if len(self._open) >= MAX_OPEN:
            self.close()
        self.spend_folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = os.path.join(self.spend_folder, f"{run_id}.jsonl")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._open[run_id] = fd
        return fd

    def close(self) -> None:
        """Close the ledgers kept open (the gateway stops; a new run's comes)."""
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()

    def spent(self, run_id: str) -> float:
        """The run's booked spend, read on from where this book last read its ledger."""
        with self._lock:
            tally = self._tallies.setdefault(run_id, _Tally())
            _read_on(os.path.join(self.spend_folder, f"{run_id}.jsonl"), tally)
            return tally.usd

    def body_seen(self, run_id: str, digest: str) -> int:
        """Count a request body (its SHA-256) for loop evidence; how many in a row now."""
        with self._lock:
            pending = self._pending.setdefault(run_id, _Pending())
            if digest == pending.last_body:
                pending.repeats += 1
            else:
                pending.last_body, pending.repeats = digest, 1
            pending.changed = True
            return pending.repeats

    def retried(self, run_id: str, error: str, at: float) -> None:
        with self._lock:
            pending = self._pending.setdefault(run_id, _Pending())
            pending.retries += 1
            pending.last_error, pending.last_error_at = error, at
            pending.changed = True

    def refused_at_cap(self, run_id: str) -> None:
        with self._lock:
            pending = self._pending.setdefault(run_id, _Pending())
            pending.cap_refusals += 1
            pending.changed = True

    def flush(self) -> None:
        with self._flushing:
            with self._lock:
                changed = {run: p for run, p in self._pending.items() if p.changed}
                for run, p in changed.items():
                    # Keep the loop evidence; what is added to the file starts again.
                    self._pending[run] = _Pending(repeats=p.repeats, last_body=p.last_body)
            if changed:
                self._add(changed)

    def _add(self, changed: dict[str, _Pending]) -> None:
        self.spend_folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.spend_folder / LOCK, "ab") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            for run_id, added in changed.items():
                stats = stats_in(self.folder, run_id)
                stats["retries"] = int(stats.get("retries", 0)) + added.retries
                stats["cap_refusals"] = int(stats.get("cap_refusals", 0)) + added.cap_refusals
                if added.last_error and added.last_error_at >= stats.get(
                    "last_upstream_error_at", 0
                ):
                    stats["last_upstream_error"] = added.last_error
                    stats["last_upstream_error_at"] = added.last_error_at
                stats["repeats"], stats["last_body"] = added.repeats, added.last_body
                path = self.spend_folder / f"{run_id}.stats.json"
                temporary = path.with_suffix(".tmp")
                temporary.write_text(json.dumps(stats, sort_keys=True))
                os.replace(temporary, path)


def _read_on(path: str | Path, tally: _Tally) -> None:
    """Add to `tally` the whole lines `path` gained past its offset (from the start again when
    the file is another: reaped, and a run of the same name began a new one)."""
    try:
        with open(path, "rb") as handle:
            seen = os.fstat(handle.fileno())
            size = seen.st_size
            if seen.st_ino != tally.ino or size < tally.offset:
                tally.ino, tally.offset, tally.usd, tally.requests = seen.st_ino, 0, 0.0, 0
            if size == tally.offset:
                return
            handle.seek(tally.offset)
            data = handle.read()
    except FileNotFoundError:
        tally.offset, tally.usd, tally.requests = 0, 0.0, 0
        return
    end = data.rfind(b"\n") + 1
    for raw in data[:end].splitlines():
        try:
            line = json.loads(raw)
            usd = float(line["usd"])
        except (ValueError, KeyError, TypeError):
            continue
        tally.usd += usd
        tally.requests += 1
    tally.offset += end


def spend_in(folder: Path, run_id: str) -> tuple[float, int]:
    """(USD, answers) the ledger of `run_id` holds (`folder`: the gateway's folder)."""
    tally = _Tally()
    _read_on(folder / FOLDER / f"{run_id}.jsonl", tally)
    return tally.usd, tally.requests


def stats_in(folder: Path, run_id: str) -> dict[str, Any]:
    """The run's stats file (empty when there is none or it cannot be read)."""
    try:
        found = json.loads((folder / FOLDER / f"{run_id}.stats.json").read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
