"""The runtime provider's world in a benchmark: the loopback fake Runtime API and what it saw.

Runtime itself cannot be measured here, so the runtime provider (the real `withruntime` SDK in
the worker) talks to `fakes.runtime.FakeRuntime`, which follows the real API's rules
(strict by default: per-key rate limit of 50 requests a second in bursts of 200 and 128 served
at once, file watches, leases) and counts every request by route and sandbox. Its sandboxes
are local ones (the local engine) under their own home.

`Flight` samples how many requests the fake holds: `in_flight` is the key's limiter count
(admitted, not yet answered to the end: a held watch stream counts until it ends; at most
`max_in_flight`), `open` also counts requests waiting for admission, and `watched` is how many
sandboxes had a watch stream open within the last `WATCH_GAP_SECONDS` (a run whose stream is
not open is not being watched; the moment between one stream and the next is not a gap).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fakes.git_http import origin_fields
from fakes.runtime import FakeRuntime, Served
from fakes.runtime.server import PROXY_VARIABLES
from overnight.core.models import RunSpec

SAMPLE_SECONDS = 0.02
WATCH_GAP_SECONDS = 1.0


def worker_env(fake: FakeRuntime, config_home: Path) -> dict[str, str | None]:
    """A worker's environment changes for the runtime provider on `fake` (no proxies)."""
    changes: dict[str, str | None] = {name: None for name in PROXY_VARIABLES}
    return changes | dict(fake.environ(config_home))


def bench_spec(run_id: str, origin: Path, provider: str, **fields: Any) -> RunSpec:
    """A spec on `provider` whose sandbox clones `origin` (over loopback git for runtime)."""
    return RunSpec.model_validate(
        {"run_id": run_id, "provider": provider, **origin_fields(origin, provider), **fields}
    )


@dataclass
class Window:
    """What the fake served between two marks (requests received in the window)."""

    seconds: float
    served: list[Served]
    in_flight_max: int
    in_flight_mean: float
    open_max: int
    watched_min: int
    watched_mean: float

    def of_runs(self, run_ids: Sequence[str]) -> list[Served]:
        """The requests about these runs' sandboxes (ids start with `<run id>-`)."""
        prefixes = tuple(f"{run_id}-" for run_id in run_ids)
        return [s for s in self.served if s.sandbox_id and s.sandbox_id.startswith(prefixes)]

    def status(self, status: int) -> int:
        return sum(1 for s in self.served if s.status == status)


@dataclass
class _Mark:
    at: float
    served: int
    samples: int = 0
    total: int = 0
    in_flight_max: int = 0
    open_max: int = 0
    watched_total: int = 0
    watched_min: int | None = None


class Flight:
    """Samples the fake's requests in flight from a thread; `mark()` starts a window,
    `window()` ends it."""

    def __init__(self, fake: FakeRuntime) -> None:
        self.fake = fake
        self._mark = _Mark(time.monotonic(), 0)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-flight", daemon=True)
        self._seen = 0
        self._open: list[Served] = []
        self._watched_at: dict[str, float] = {}

    def __enter__(self) -> Flight:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def in_flight(self) -> int:
        # The limiter of the key (a private part of the fake: it has no public gauge).
        limiter = getattr(self.fake.api, "_limiters", {}).get(self.fake.api_key)
        return int(getattr(limiter, "in_flight", 0))

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            self.sample()

    def sample(self) -> None:
        traffic = self.fake.api.traffic
        with traffic.lock:
            new = traffic.served[self._seen :]
            self._seen += len(new)
        self._open = [s for s in self._open + new if not s.done]
        flying = self.in_flight()
        now = time.monotonic()
        for s in self._open:
            if s.route == "watch_events" and s.sandbox_id:
                self._watched_at[s.sandbox_id] = now
        watched = sum(1 for at in self._watched_at.values() if at >= now - WATCH_GAP_SECONDS)
        with self._lock:
            mark = self._mark
            mark.samples += 1
            mark.total += flying
            mark.in_flight_max = max(mark.in_flight_max, flying)
            mark.open_max = max(mark.open_max, len(self._open))
            mark.watched_total += watched
            low = mark.watched_min
            mark.watched_min = watched if low is None else min(low, watched)

    def mark(self) -> None:
        with self._lock:
            self._mark = _Mark(time.monotonic(), self.fake.request_count())

    def window(self) -> Window:
        self.sample()
        served = self.fake.served()
        with self._lock:
            mark = self._mark
        return Window(
            seconds=time.monotonic() - mark.at,
            served=served[mark.served :],
            in_flight_max=mark.in_flight_max,
            in_flight_mean=mark.total / max(1, mark.samples),
            open_max=mark.open_max,
            watched_min=mark.watched_min or 0,
            watched_mean=mark.watched_total / max(1, mark.samples),
        )
