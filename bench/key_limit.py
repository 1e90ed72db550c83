"""How many runtime runs one API key carries: 100 concurrent runs against the limiter.

`workers` overnight worker processes (runtime provider, real `withruntime` SDK), all on one key
of one fake Runtime API with the real API's per-key limits (`Rules()`: 50 requests a second in
bursts of 200, 128 served at once, a request over the limit waiting up to 5 s, then 429
`rate_limited`). `runs` ticking agents (bench/agents/ticker), spread evenly over the workers,
are started `per_second` a second; once all are up, a window of `window` seconds is measured.
Reported for the start (from the first start until all are up) and the window: 429 answers,
the most requests in flight (admitted by the limiter: a held watch stream counts until it
ends) and open (in flight or waiting for a slot), how many runs had their watch stream open
(fewest, mean), and the requests per run-hour at this scale.

Several workers share the key, as in a deployment. The check with `workers=1` measures how many
runs one worker watches at once: its SDK client must hold a stream per watched run
(withruntime 0.35's default pool, 48 connections with 40 for streams, capped a worker at 40
until the runtime provider sized its pool for 128 streams plus calls).
"""

from __future__ import annotations

import asyncio
import uuid
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench.fleet import (
    BenchRun,
    counts_per_hour,
    end_runs,
    start_runs,
    wait_up,
    worker_args,
    workers,
)
from bench.procs import WorkerProcess
from bench.provider_cost import CostSettings, ticker_spec
from bench.runtime_world import Flight, Window, worker_env
from fakes.runtime import FakeRuntime, Rules
from overnight.demo.sample_demo import make_origin


@dataclass(frozen=True)
class KeySettings:
    runs: int = 100
    workers: int = 3
    per_second: float = 2.0
    window: float = 180.0
    settle: float = 10.0
    start_timeout: float = 300.0


def _facts(window: Window, runs: int) -> dict[str, Any]:
    return {
        "seconds": round(window.seconds, 1),
        "requests": len(window.served),
        "requests_per_run_hour": counts_per_hour(len(window.served), runs, window.seconds),
        "status_429": window.status(429),
        "in_flight_max": window.in_flight_max,
        "in_flight_mean": round(window.in_flight_mean, 1),
        "open_max": window.open_max,
        "watched_min": window.watched_min,
        "watched_mean": round(window.watched_mean, 1),
    }


async def measure_key_limit(
    client: Client,
    address: str,
    state_dir: Path,
    settings: KeySettings,
    cost: CostSettings,
    say: Any = print,
) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    name = f"key-{settings.workers}w"
    origin = make_origin(state_dir / f"{name}-origin").origin
    queues = [f"bench-{name}-{i}-{tag}" for i in range(settings.workers)]
    rules = Rules()  # the real API's limits
    async with AsyncExitStack() as stack:
        fake = FakeRuntime.local(
            state_dir / f"runtime-home-{name}", api_key=f"{name}-{tag}", rules=rules
        )
        await stack.enter_async_context(fake)
        flight = stack.enter_context(Flight(fake))
        env = worker_env(fake, state_dir / "config")
        each = -(-settings.runs // settings.workers)
        group = [
            WorkerProcess(
                worker_args("overnight", "runtime", address, client.namespace, queue, each),
                state_dir / f"{name}-worker-{i}.log",
                env=env,
            )
            for i, queue in enumerate(queues)
        ]
        await stack.enter_async_context(workers(group))
        runs = [
            BenchRun(
                "overnight",
                "runtime",
                "ticking",
                ticker_spec(f"{name}-{i}-{tag}", origin, "runtime", "ticking", cost),
                queues[i % settings.workers],
            )
            for i in range(settings.runs)
        ]
        try:
            flight.mark()
            await start_runs(client, runs, per_second=settings.per_second)
            late = await wait_up(client, runs, settings.start_timeout)
            await asyncio.sleep(settings.settle)
            start = flight.window()
            say(
                f"key limit: {settings.runs} runs on {settings.workers} workers up "
                f"({len(late)} late); {settings.window:g} s"
            )
            flight.mark()
            await asyncio.sleep(settings.window)
            steady = flight.window()
        finally:
            await end_runs(client, runs, [])
    return {
        "settings": asdict(settings),
        "limits": {
            "rate_per_second": rules.rate_per_second,
            "burst": rules.burst,
            "max_in_flight": rules.max_in_flight,
            "max_queue_seconds": rules.max_queue_seconds,
        },
        "late_runs": late,
        "start": _facts(start, settings.runs),
        "steady": _facts(steady, settings.runs),
        "routes_at_start": dict(sorted(_routes(start).items())),
    }


def _routes(window: Window) -> dict[str, int]:
    found: dict[str, int] = {}
    for served in window.served:
        found[served.route] = found.get(served.route, 0) + 1
    return found
