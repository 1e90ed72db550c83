"""How many runtime runs one API key carries: 100 concurrent runs against the limiter.

One overnight worker process (runtime provider, real `withruntime` SDK) and one fake Runtime
API with the real API's per-key limits (`Rules()`: 50 requests a second in bursts of 200, 128
served at once, a request over the limit waiting up to 5 s, then 429 `rate_limited`). `runs`
ticking agents (bench/agents/ticker) are started `per_second` a second; once all are up, a
window of `window` seconds is measured. Reported for the start (from the first start until
all are up) and the window: 429 answers, the most requests in flight (admitted by the limiter:
a held watch stream counts until it ends) and open (in flight or waiting for a slot), and the
requests per run-hour at this scale.
"""

from __future__ import annotations

import asyncio
import uuid
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench.fleet import BenchRun, counts_per_hour, end_runs, start_runs, wait_up, worker_args
from bench.procs import worker_process
from bench.provider_cost import CostSettings, ticker_spec
from bench.runtime_world import Flight, Window, worker_env
from overnight.demo import make_origin
from tests.fake_runtime import FakeRuntime, Rules


@dataclass(frozen=True)
class KeySettings:
    runs: int = 100
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
    }


async def measure_key_limit(
    client: Client,
    address: str,
    state_dir: Path,
    settings: KeySettings,
    cost: CostSettings,
    say: Any = print,
) -> dict[str, Any]:
    origin = make_origin(state_dir / "key-origin").origin
    tag = uuid.uuid4().hex[:6]
    queue = f"bench-key-{tag}"
    rules = Rules()  # the real API's limits
    async with AsyncExitStack() as stack:
        fake = await stack.enter_async_context(
            FakeRuntime.local(state_dir / "runtime-home-key", api_key=f"key-{tag}", rules=rules)
        )
        flight = stack.enter_context(Flight(fake))
        args = worker_args("overnight", "runtime", address, client.namespace, queue, settings.runs)
        env = worker_env(fake, state_dir / "config")
        await stack.enter_async_context(worker_process(args, state_dir / "key-worker.log", env=env))
        runs = [
            BenchRun(
                "overnight",
                "runtime",
                "ticking",
                ticker_spec(f"key-{i}-{tag}", origin, "runtime", "ticking", cost),
                queue,
            )
            for i in range(settings.runs)
        ]
        try:
            flight.mark()
            await start_runs(client, runs, per_second=settings.per_second)
            late = await wait_up(client, runs, settings.start_timeout)
            await asyncio.sleep(settings.settle)
            start = flight.window()
            say(f"key limit: {settings.runs} runs up ({len(late)} late); {settings.window:g} s")
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
