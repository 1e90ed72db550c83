"""The gateway's books as the rest of overnight reads them, and their reaping.

Under `$OVERNIGHT_HOME/gateway/`:

- `spend/<run_id>.jsonl` and `spend/<run_id>.stats.json`: what the model routes booked to a
  run and their stats (model_ledger.py); read by the run's looks (`books_of`);
- `refused/<sandbox>.json`: the connections refused to a sandbox (refused.py), for its run's
  status (`refusals_of`).

Both are kept per run and per sandbox and were never deleted. `overnight reap` (hourly on the
worker) now deletes a run's books once its run is closed or gone (its ledger and stats read
for the last time by its end), and a sandbox's refusals once the sandbox no longer runs nor
waits paused (its run took the counts at each look): `reap_books`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from activities.gateway.model_ledger import FOLDER as SPEND_FOLDER
from activities.gateway.model_ledger import spend_in, stats_in
from activities.gateway.records import SANDBOX_FILE, SANDBOXES
from activities.gateway.refused import FOLDER as REFUSED_FOLDER
from activities.gateway.refused import refused_counts
from activities.models import GatewayBooks

FOLDER = "gateway"
# A sandbox in one of these states may still be looked at by its run.
_LIVE_STATES = ("running", "paused")
_SPEND_SUFFIXES = (".stats.json", ".jsonl")


def folder_of(home: Path) -> Path:
    return home / FOLDER


def spend_of(home: Path, run_id: str) -> tuple[float, int]:
    """(USD, answers) the gateway booked to `run_id` (model_ledger.py)."""
    return spend_in(folder_of(home), run_id)


def model_stats_of(home: Path, run_id: str) -> dict[str, Any]:
    """The model routes' stats of `run_id`: `retries`, `last_upstream_error` and its time
    `last_upstream_error_at` (epoch seconds), `cap_refusals`, `repeats` (requests in a row
    with the same body) and `last_body` (its SHA-256); empty when there are none."""
    return stats_in(folder_of(home), run_id)


def books_of(home: Path, run_id: str) -> GatewayBooks:
    """What the gateway booked to `run_id` on this host, with its stats, for the run."""
    usd, answers = spend_of(home, run_id)
    stats = model_stats_of(home, run_id)

    def count(name: str) -> int:
        value = stats.get(name)
        return value if isinstance(value, int) and value >= 0 else 0

    error = stats.get("last_upstream_error")
    at = stats.get("last_upstream_error_at")
    return GatewayBooks(
        usd=max(0.0, usd),
        answers=answers,
        retries=count("retries"),
        last_upstream_error=error if isinstance(error, str) else "",
        last_upstream_error_at=float(at) if isinstance(at, int | float) else None,
        cap_refusals=count("cap_refusals"),
        repeats=count("repeats"),
        last_body=body if isinstance(body := stats.get("last_body"), str) else "",
    )


def refusals_of(home: Path, sandbox: str) -> dict[str, int]:
    return refused_counts(folder_of(home) / REFUSED_FOLDER, sandbox)


@dataclass(frozen=True)
class ReapedBook:
    kind: str  # "spend" (a run's ledger and stats) or "refused" (a sandbox's refusals)
    owner: str  # the run's id or the sandbox's name
    freed_bytes: int


def booked_runs(home: Path) -> list[str]:
    """The runs this host's gateway keeps books of."""
    return sorted(_spend_files(folder_of(home)))


def reap_books(home: Path, run_open: Callable[[str], bool]) -> list[ReapedBook]:
    """Delete the books of runs that are not open (`run_open(run_id)` False: closed or gone)
    and the refusals of sandboxes that neither run nor wait paused here; one entry per run or
    sandbox. A file that cannot be deleted is left for the next reap."""
    folder = folder_of(home)
    reaped: list[ReapedBook] = []
    for run_id, paths in sorted(_spend_files(folder).items()):
        if not run_open(run_id) and (freed := _delete(paths)) is not None:
            reaped.append(ReapedBook("spend", run_id, freed))
    for path in _files(folder / REFUSED_FOLDER):
        sandbox = path.name.removesuffix(".json")
        if path.name.endswith(".json") and not _sandbox_live(home, sandbox):
            if (freed := _delete([path])) is not None:
                reaped.append(ReapedBook("refused", sandbox, freed))
    return reaped


def _spend_files(folder: Path) -> dict[str, list[Path]]:
    runs: dict[str, list[Path]] = {}
    for path in _files(folder / SPEND_FOLDER):
        run_id = next((path.name[: -len(s)] for s in _SPEND_SUFFIXES if path.name.endswith(s)), "")
        if run_id:
            runs.setdefault(run_id, []).append(path)
    return runs


def _files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    except OSError:
        return []


def _sandbox_live(home: Path, sandbox: str) -> bool:
    try:
        meta = json.loads((home / SANDBOXES / sandbox / SANDBOX_FILE).read_text())
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True  # unreadable now: judged at the next reap
    return not isinstance(meta, dict) or meta.get("state") in _LIVE_STATES


def _delete(paths: list[Path]) -> int | None:
    freed = 0
    try:
        for path in paths:
            freed += path.stat().st_size
            os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError:
        return None
    return freed
