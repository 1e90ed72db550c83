"""1,000 concurrent Runtime runs on one key, against the strict fake's limiter.

`workers` worker processes (`bench.runtime_fleet_worker`: the runtime provider and the real
`withruntime` SDK, one client each, `streams` watch streams each and one event feed) share one
key of one fake Runtime API at the real API's limits (50 requests a second in bursts of 200,
128 served at once, a wait of up to 5 s and then 429). Each run is an observe loop as the
`observe_agent` activity runs it (Temporal itself is left out: its cost per run is the scale
benchmark's). The agents are the fake's virtual agents (`fakes.runtime.virtual`: a process
record, no process), so a thousand fit on a laptop; each writes a 4 KiB checkpoint every
`tick` seconds into its sandbox, which the fake's watches see as they see a real agent's.

Measured: 429 answers over the whole run; the most watch streams held at once, and the most
requests in flight; in a steady window, requests per run-hour, split into what does not grow
with the runs (the feed's looks, the capped streams) and what does (per run); from them the
runs one key sustains by rate; then every agent crashes at a random moment over `crash_span`
and each run's crash-to-noticed is measured (its exit as recorded, to its observe returning).
"""

from __future__ import annotations

import asyncio
import heapq
import json
import os
import random
import sys
import time
import uuid
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from activities.providers.protocol import SandboxRequest
from activities.providers.runtime.provider import RuntimeProvider
from activities.providers.runtime.settings import EVENTS_SECONDS_VARIABLE, STREAMS_VARIABLE
from activities.providers.runtime.watch_stream import exit_marker_path
from bench.procs import REPO_ROOT
from bench.report import percentile
from bench.runtime_world import Flight, Window, worker_env
from fakes.runtime import FakeRuntime, Rules

CHECKPOINT = "/workspace/checkpoint.json"
KEY_RATE_PER_HOUR = 50 * 3600
# Routes whose requests do not grow with the runs: the feed's looks, and the capped streams.
FIXED_ROUTES = ("events", "watch_events")
HELD_SECONDS = 1.0
# The share of the key's 128 that watching may hold (the rest: creates, reads, the others).
CEILING = 96


@dataclass(frozen=True)
class FleetSettings:
    runs: int = 1000
    workers: int = 3
    streams: int = 30  # per worker, the default: 3 x 30 = 90 of the key's 128
    events_seconds: float = 1.0
    poll_seconds: float = 60.0
    tick: tuple[float, float] = (20.0, 30.0)
    creates_per_second: float = 40.0
    starts_per_second: float = 8.0  # first looks (4 requests each), across the workers
    window: float = 180.0
    crash_span: float = 180.0
    # The fake's watch scanner tick (a fake's cost, not Runtime's), and its file-hook window.
    scan_seconds: float = 0.5
    hook_window: float = 5.0

    @staticmethod
    def quick() -> FleetSettings:
        return FleetSettings(
            # More runs than streams: each worker reads some through its event feed.
            runs=6,
            workers=2,
            streams=2,
            events_seconds=0.5,
            poll_seconds=4,
            tick=(2.0, 3.0),
            creates_per_second=20,
            starts_per_second=8,
            # 8 s: long enough to see each run's checkpoint copied (ticks every 2-3 s) under
            # load; a 3 s window saw only the feeds' looks, and no rate to say.
            window=8,
            crash_span=3,
            scan_seconds=0.1,
            hook_window=1.0,
        )


class HeldStreams:
    """The most watch streams open at once, sampled every 50 ms. `most` counts the streams
    open for at least `HELD_SECONDS` (a stream a worker has just closed and the one it opens
    next overlap for a moment at the server: a hand-over, not a held request); `most_raw`
    counts every open one."""

    def __init__(self, fake: FakeRuntime) -> None:
        self.fake = fake
        self.most = 0
        self.most_raw = 0
        self._seen = 0
        self._open: dict[int, tuple[Any, float]] = {}

    def sample(self) -> None:
        traffic = self.fake.api.traffic
        with traffic.lock:
            new = traffic.served[self._seen :]
            self._seen += len(new)
        now = time.monotonic()
        for served in new:
            if served.route == "watch_events":
                self._open[id(served)] = (served, now)
        self._open = {k: (s, at) for k, (s, at) in self._open.items() if not s.done}
        self.most_raw = max(self.most_raw, len(self._open))
        held = sum(1 for _, at in self._open.values() if now - at >= HELD_SECONDS)
        self.most = max(self.most, held)


async def _sample(held: HeldStreams, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await asyncio.to_thread(held.sample)
        await asyncio.sleep(0.05)


def _checkpoint(step: int) -> bytes:
    text = json.dumps({"step": step, "next": "more", "notes": []})
    return json.dumps({"step": step, "next": "more", "notes": ["x" * (4000 - len(text))]}).encode()


async def _tick_agents(
    fake: FakeRuntime, runs: list[dict[str, str]], tick: tuple[float, float], stop: asyncio.Event
) -> None:
    rng = random.Random(7)
    now = time.monotonic()
    due = [(now + rng.uniform(*tick), i, 1) for i in range(len(runs))]
    heapq.heapify(due)
    while not stop.is_set():
        at, i, step = due[0]
        wait = at - time.monotonic()
        if wait > 0:
            try:
                await asyncio.wait_for(stop.wait(), min(wait, 0.5))
            except TimeoutError:
                pass
            continue
        heapq.heapreplace(due, (at + rng.uniform(*tick), i, step + 1))
        if runs[i].get("ended"):
            continue
        await asyncio.to_thread(
            fake.write_guest_file, runs[i]["sandbox_id"], CHECKPOINT, _checkpoint(step)
        )


async def _make_runs(fake: FakeRuntime, settings: FleetSettings, tag: str) -> list[dict[str, str]]:
    provider = RuntimeProvider()
    runs: list[dict[str, str]] = []
    try:
        for i in range(settings.runs):
            began = time.monotonic()
            request = SandboxRequest(
                name=f"fleet-{tag}-{i}", labels={}, timeout_seconds=3600, vcpu=1, memory_mib=512
            )
            info, _ = await provider.get_or_create(request)
            fake.write_guest_file(info.sandbox_id, CHECKPOINT, _checkpoint(0))
            key = f"fleet-{tag}-{i}-1-0"
            process_id = fake.start_virtual_agent(info.sandbox_id, f"agent {key}")
            runs.append({"sandbox_id": info.sandbox_id, "process_id": process_id, "key": key})
            await asyncio.sleep(
                max(0.0, 1 / settings.creates_per_second - (time.monotonic() - began))
            )
    finally:
        await provider.aclose()
    return runs


async def measure_runtime_fleet(
    state_dir: Path, settings: FleetSettings, say: Any = print
) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    folder = state_dir / f"fleet-{tag}"
    folder.mkdir(parents=True)
    rules = Rules(poll_seconds=settings.scan_seconds, file_hook_window_seconds=settings.hook_window)
    env = os.environ.copy()
    async with AsyncExitStack() as stack:
        fake = FakeRuntime.local(folder / "home", api_key=f"fleet-{tag}", rules=rules)
        await stack.enter_async_context(fake)
        flight = stack.enter_context(Flight(fake))
        changes = worker_env(fake, folder / "config")
        # This process makes the sandboxes through the fake too: its environment points there
        # for the benchmark's life, and is given back after.
        before = {name: os.environ.get(name) for name in changes}
        stack.callback(_restore, before)
        for name, value in changes.items():
            if value is None:
                env.pop(name, None)
                os.environ.pop(name, None)
            else:
                env[name] = os.environ[name] = value
        env[STREAMS_VARIABLE] = str(settings.streams)
        env[EVENTS_SECONDS_VARIABLE] = str(settings.events_seconds)
        flight.mark()
        began = time.monotonic()
        runs = await _make_runs(fake, settings, tag)
        say(f"runtime fleet: {len(runs)} sandboxes in {time.monotonic() - began:.0f} s")
        stop = asyncio.Event()
        held = HeldStreams(fake)
        background = [
            asyncio.create_task(_tick_agents(fake, runs, settings.tick, stop)),
            asyncio.create_task(_sample(held, stop)),
        ]
        shares = [runs[w :: settings.workers] for w in range(settings.workers)]
        plan = {
            "workers": shares,
            "poll_seconds": settings.poll_seconds,
            "starts_per_second": settings.starts_per_second / settings.workers,
        }
        plan_file = folder / "plan.json"
        plan_file.write_text(json.dumps(plan))
        outs = [folder / f"worker-{w}.json" for w in range(settings.workers)]
        procs = []
        for w, out in enumerate(outs):
            # The child writes to its own copy of the file; this one is closed at once.
            with (folder / f"worker-{w}.log").open("ab") as log:
                procs.append(
                    await asyncio.create_subprocess_exec(
                        sys.executable,
                        "-m",
                        "bench.runtime_fleet_worker",
                        str(plan_file),
                        str(w),
                        str(out),
                        cwd=REPO_ROOT,
                        env=env,
                        stdout=log,
                        stderr=log,
                    )
                )
        try:
            ready_by = time.monotonic() + 60 + 6 * settings.runs / settings.starts_per_second
            while not all(o.with_suffix(".ready").exists() for o in outs):
                if time.monotonic() > ready_by or any(p.returncode is not None for p in procs):
                    raise RuntimeError(f"the fleet's workers did not start: see {folder}")
                await asyncio.sleep(0.5)
            start = flight.window()
            say(f"runtime fleet: all watched after {time.monotonic() - began:.0f} s")
            flight.mark()
            await asyncio.sleep(settings.window)
            steady = flight.window()
            ended = await _crash_all(fake, runs, settings.crash_span)
            await asyncio.wait_for(
                asyncio.gather(*(p.wait() for p in procs)), settings.crash_span + 180
            )
            crash = flight.window()
        finally:
            stop.set()
            for proc in procs:
                if proc.returncode is None:
                    proc.kill()
            await asyncio.gather(*background, return_exceptions=True)
    noticed: dict[str, tuple[float, str]] = {}
    errors: list[str] = []
    for out in outs:
        found = json.loads(out.read_text()) if out.exists() else {}
        noticed.update(found.get("noticed", {}))
        errors += found.get("errors", [])
    spans: dict[str, list[float]] = {}
    for sandbox_id, at in ended.items():
        if sandbox_id in noticed:
            seen_at, how = noticed[sandbox_id]
            spans.setdefault("all", []).append(seen_at - at)
            spans.setdefault(how, []).append(seen_at - at)
    return _summary(settings, rules, start, steady, crash, held, spans, errors)


async def _crash_all(
    fake: FakeRuntime, runs: list[dict[str, str]], span: float
) -> dict[str, float]:
    """Every agent crashes (exit 3) at a random moment over `span`; when each did."""
    rng = random.Random(3)
    order = sorted((rng.uniform(0, span), i) for i in range(len(runs)))
    began = time.monotonic()
    ended: dict[str, float] = {}
    for at, i in order:
        await asyncio.sleep(max(0.0, began + at - time.monotonic()))
        run = runs[i]
        run["ended"] = "yes"
        marker = exit_marker_path(CHECKPOINT, run["key"])
        ended[run["sandbox_id"]] = await asyncio.to_thread(
            fake.end_virtual_agent, run["sandbox_id"], run["process_id"], 3, marker
        )
    return ended


def _summary(
    settings: FleetSettings,
    rules: Rules,
    start: Window,
    steady: Window,
    crash: Window,
    held: HeldStreams,
    spans: dict[str, list[float]],
    errors: list[str],
) -> dict[str, Any]:
    hours = steady.seconds / 3600
    by_route = _by_route(steady.served)
    fixed = sum(by_route.get(route, 0) for route in FIXED_ROUTES) / hours
    per_run = (len(steady.served) / hours - fixed) / settings.runs
    sustained = (KEY_RATE_PER_HOUR - fixed) / per_run if per_run > 0 else None
    return {
        "settings": asdict(settings),
        "ceiling": CEILING,
        "streams_configured": settings.workers * settings.streams,
        "limits": {"rate_per_second": rules.rate_per_second, "max_in_flight": rules.max_in_flight},
        "status_429": start.status(429) + steady.status(429) + crash.status(429),
        "status_429_by_phase_and_route": {
            phase: _by_route([s for s in window.served if s.status == 429])
            for phase, window in (("start", start), ("steady", steady), ("crash", crash))
        },
        "streams_held_most": held.most,
        "streams_open_most": held.most_raw,
        "in_flight_most": max(start.in_flight_max, steady.in_flight_max, crash.in_flight_max),
        "steady_seconds": round(steady.seconds, 1),
        "requests_per_run_hour": round(len(steady.served) / hours / settings.runs, 1),
        "fixed_per_hour": round(fixed),
        "per_run_hour": round(per_run, 1),
        "routes_per_run_hour": {
            route: round(count / hours / settings.runs, 1)
            for route, count in sorted(by_route.items())
        },
        "runs_per_key_by_rate": None if sustained is None else int(sustained),
        "crash_samples": len(spans.get("all", [])),
        "crash_missing": settings.runs - len(spans.get("all", [])),
        "crash_to_noticed": {how: _spread(values) for how, values in sorted(spans.items())},
        "errors": errors[:20],
    }


def _by_route(served: list[Any]) -> dict[str, int]:
    found: dict[str, int] = {}
    for one in served:
        found[one.route] = found.get(one.route, 0) + 1
    return found


def _spread(values: list[float]) -> dict[str, float | int]:
    return {
        "n": len(values),
        "median": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
        "max": round(max(values), 3),
    }


def _restore(before: dict[str, str | None]) -> None:
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
