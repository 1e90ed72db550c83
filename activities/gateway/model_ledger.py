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


@dataclass
class _Tally:
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

    @property
    def spend_folder(self) -> Path:
        return self.folder / FOLDER

    def book(self, run_id: str, line: dict[str, Any]) -> None:
        """Append one answer's line to the run's ledger (at once: it is money)."""
        self.spend_folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = (json.dumps(line, sort_keys=True) + "\n").encode()
        fd = os.open(
            self.spend_folder / f"{run_id}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, data)
        finally:
            os.close(fd)

    def spent(self, run_id: str) -> float:
        """The run's booked spend, read on from where this book last read its ledger."""
        with self._lock:
            tally = self._tallies.setdefault(run_id, _Tally())
            _read_on(self.spend_folder / f"{run_id}.jsonl", tally)
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


def _read_on(path: Path, tally: _Tally) -> None:
    """Add to `tally` the whole lines `path` gained past its offset."""
    try:
        with open(path, "rb") as handle:
            handle.seek(tally.offset)
            data = handle.read()
    except FileNotFoundError:
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
