"""What watching a run costs its provider, per supervised run-hour, overnight beside the baseline.

Real everything but Runtime: the dev server, one worker process per (system, provider, agent)
group (`bench.worker_main`), the runtime provider through the real `withruntime` SDK against
the loopback fake Runtime API (`bench.runtime_world`; one fake per system, so each system's
requests and held requests are its own), and the local provider with its engine counting looks
and reads (`bench.counting`). The agent is `bench/agents/ticker`: a "ticking" one writes a
4 KiB checkpoint every 20-30 s, a "quiet" one writes one at its start and then nothing.

All runs start at once; once all are up (and `settle` seconds more), a window of `window`
seconds is measured: requests the fake received about each run's sandboxes, bytes of file
downloads (route "read"), the local engine's stats, process looks and reads, and each worker's
CPU (minus what it used idle before any run, measured first). Counts are scaled to a run-hour.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench.counting import Counts, read_counts
from bench.fleet import (
    SYSTEMS,
    BenchRun,
    Seen,
    counts_per_hour,
    end_runs,
    start_runs,
    statuses,
    wait_up,
    worker_args,
    workers,
)
from bench.procs import WorkerProcess
from bench.runtime_world import Flight, Window, bench_spec, worker_env
from fakes.runtime import FakeRuntime
from overnight.demo.sample_demo import make_origin

TICKER_DIR = Path(__file__).resolve().parent / "agents" / "ticker"
KINDS = ("ticking", "quiet")
PROVIDERS = ("runtime", "local")


@dataclass(frozen=True)
class CostSettings:
    runs_per_kind: int = 4
    window: float = 600.0
    poll_seconds: float = 60.0
    tick: tuple[float, float] = (20.0, 30.0)
    checkpoint_bytes: int = 4096
    idle: float = 10.0
    settle: float = 10.0
    start_timeout: float = 240.0


@dataclass
class Group:
    """One worker's runs: a system on a provider (local: one agent kind per worker)."""

    system: str
    provider: str
    kind: str | None
    worker: WorkerProcess
    queue: str
    counts_file: Path | None = None
    idle_cpu_per_second: float = 0.0


def ticker_spec(run_id: str, origin: Path, provider: str, kind: str, settings: CostSettings) -> Any:
    low, high = settings.tick
    return bench_spec(
        run_id,
        origin,
        provider,
        agent_dir=str(TICKER_DIR),
        command="python3 /workspace/agent/main.py",
        env={
            "TICK_SECONDS": "quiet" if kind == "quiet" else f"{low:g} {high:g}",
            "CHECKPOINT_BYTES": str(settings.checkpoint_bytes),
        },
        poll_seconds=settings.poll_seconds,
        # Neither system acts on a stall within the window: the quiet agent is just quiet.
        stall_seconds=3600,
        sandbox_timeout_seconds=3600,
    )


async def measure_provider_cost(
    client: Client,
    address: str,
    state_dir: Path,
    settings: CostSettings,
    say: Any = print,
) -> dict[str, Any]:
    """The measured window's counts, per (system, provider, kind); see provider_rows."""
    origin = make_origin(state_dir / "cost-origin").origin
    tag = uuid.uuid4().hex[:6]
    async with AsyncExitStack() as stack:
        fakes: dict[str, FakeRuntime] = {}
        flights: dict[str, Flight] = {}
        for system in SYSTEMS:
            fake = FakeRuntime.local(
                state_dir / f"runtime-home-{system}", api_key=f"{system}-{tag}"
            )
            fakes[system] = await stack.enter_async_context(fake)
            flights[system] = stack.enter_context(Flight(fake))
        groups = _groups(address, client.namespace, state_dir, fakes, settings, tag)
        await stack.enter_async_context(workers([group.worker for group in groups]))
        await _idle_cpu(groups, settings.idle)
        runs = _runs(groups, origin, settings, tag)
        try:
            await start_runs(client, runs)
            late = await wait_up(client, runs, settings.start_timeout)
            await asyncio.sleep(settings.settle)
            say(f"provider cost: {len(runs)} runs up ({len(late)} late); {settings.window:g} s")
            for flight in flights.values():
                flight.mark()
            before = _snapshot(groups)
            await asyncio.sleep(settings.window)
            windows = {system: flights[system].window() for system in SYSTEMS}
            after = _snapshot(groups)
            found = await statuses(client, runs)
        finally:
            await end_runs(client, runs, [None])
    return _results(groups, runs, windows, before, after, found, late, settings)


def _groups(
    address: str,
    namespace: str,
    state_dir: Path,
    fakes: dict[str, FakeRuntime],
    settings: CostSettings,
    tag: str,
) -> list[Group]:
    groups = []
    for system in SYSTEMS:
        for provider, kind in [("runtime", None), *(("local", k) for k in KINDS)]:
            name = f"{system}-{provider}" + (f"-{kind}" if kind else "")
            queue = f"bench-cost-{name}-{tag}"
            runs = settings.runs_per_kind * (len(KINDS) if kind is None else 1)
            args = worker_args(system, provider, address, namespace, queue, runs)
            counts_file = state_dir / f"cost-{name}.counts.json" if provider == "local" else None
            if counts_file is not None:
                args += ["--counts-file", str(counts_file)]
            env = worker_env(fakes[system], state_dir / "config") if provider == "runtime" else {}
            worker = WorkerProcess(args, state_dir / f"cost-worker-{name}.log", env=env)
            groups.append(Group(system, provider, kind, worker, queue, counts_file))
    return groups


async def _idle_cpu(groups: list[Group], seconds: float) -> None:
    before = [group.worker.cpu_seconds() for group in groups]
    await asyncio.sleep(seconds)
    for group, cpu in zip(groups, before, strict=True):
        group.idle_cpu_per_second = (group.worker.cpu_seconds() - cpu) / seconds


def _runs(groups: list[Group], origin: Path, settings: CostSettings, tag: str) -> list[BenchRun]:
    runs = []
    for group in groups:
        for kind in KINDS if group.kind is None else [group.kind]:
            for i in range(settings.runs_per_kind):
                short = {"overnight": "on", "baseline": "bl"}[group.system]
                run_id = f"cost-{short}-{group.provider[:2]}-{kind[:4]}-{i}-{tag}"
                spec = ticker_spec(run_id, origin, group.provider, kind, settings)
                runs.append(BenchRun(group.system, group.provider, kind, spec, group.queue))
    return runs


@dataclass
class _Snapshot:
    at: float
    cpu: list[float]
    counts: list[Counts]


def _snapshot(groups: list[Group]) -> _Snapshot:
    return _Snapshot(
        at=time.monotonic(),
        cpu=[group.worker.cpu_seconds() for group in groups],
        counts=[read_counts(g.counts_file) if g.counts_file else {} for g in groups],
    )


def _local_counts(runs: list[BenchRun], before: Counts, after: Counts) -> Counter[str]:
    """What the engine did for these runs' sandboxes (ids start with `<run id>-`) between."""
    total: Counter[str] = Counter()
    prefixes = tuple(f"{run.run_id}-" for run in runs)
    for sandbox_id, counts in after.items():
        if sandbox_id.startswith(prefixes):
            old = before.get(sandbox_id, {})
            total.update({what: n - old.get(what, 0) for what, n in counts.items()})
    return total


def _restarts(status: Seen | None) -> int:
    return 0 if status is None else len(status.restarts)


def _results(
    groups: list[Group],
    runs: list[BenchRun],
    windows: dict[str, Window],
    before: _Snapshot,
    after: _Snapshot,
    found: dict[str, Seen | None],
    late: list[str],
    settings: CostSettings,
) -> dict[str, Any]:
    seconds = after.at - before.at
    cells: dict[str, Any] = {}
    for i, group in enumerate(groups):
        cpu = after.cpu[i] - before.cpu[i] - group.idle_cpu_per_second * seconds
        mine = [run for run in runs if run.queue == group.queue]
        for kind in KINDS if group.kind is None else [group.kind]:
            ours = [run for run in mine if run.kind == kind]
            cell: dict[str, Any] = {"runs": len(ours)}
            if group.provider == "runtime":
                served = windows[group.system].of_runs([run.run_id for run in ours])
                routes = Counter(s.route for s in served)
                downloaded = sum(s.bytes_sent for s in served if s.route == "read")
                cell["requests_per_hour"] = counts_per_hour(len(served), len(ours), seconds)
                cell["read_bytes_per_hour"] = counts_per_hour(downloaded, len(ours), seconds)
                cell["routes_per_hour"] = {
                    route: round(counts_per_hour(n, len(ours), seconds) or 0, 1)
                    for route, n in routes.most_common()
                }
            else:
                done = _local_counts(ours, before.counts[i], after.counts[i])
                for what in ("stamp", "process", "read", "read_bytes"):
                    cell[f"{what}_per_hour"] = counts_per_hour(done[what], len(ours), seconds)
                cell["worker_cpu_per_run"] = cpu / seconds / max(1, len(ours))
                cell["worker_idle_cpu"] = group.idle_cpu_per_second
            cell["restarts"] = sum(_restarts(found.get(run.run_id)) for run in ours)
            cells[f"{group.system}/{group.provider}/{kind}"] = cell
        if group.provider == "runtime":
            window = windows[group.system]
            cells[f"{group.system}/runtime"] = {
                "runs": len(mine),
                "worker_cpu_per_run": cpu / seconds / max(1, len(mine)),
                "in_flight_mean": window.in_flight_mean,
                "in_flight_max": window.in_flight_max,
                "held_per_run": window.in_flight_mean / max(1, len(mine)),
                "status_429": window.status(429),
                "requests": len(window.served),
            }
    return {
        "settings": asdict(settings),
        "window_seconds": round(seconds, 1),
        "late_runs": late,
        "cells": cells,
    }
