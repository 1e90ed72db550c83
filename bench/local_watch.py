"""What quiet local runs cost a worker: `python -m bench.local_watch [--runs N] [--window S]`.

Real everything: a dev server, one worker process per system (overnight's `serve` and the
naive port's worker, `bench.worker_main`), the local provider (bubblewrap sandboxes, their own
network) and `bench/agents/ticker` as a quiet agent (one checkpoint at its start, then
nothing: an agent waiting on its model or a long build). Both systems' runs start at once.

Each worker's CPU and RSS are read idle (before any run), then over a window once all runs are
up; the differences, per run, are scaled to 1,000 runs. overnight watches each agent through
the worker's inotify instance and the agent's pidfd (activities/providers/local/watch_hub.py);
the naive port looks every `poll_seconds` with an activity. Rows (group `localwatch`) go into
bench/results/latest.json beside the suite's (the suite keeps them).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.fleet import SYSTEMS, BenchRun, end_runs, start_runs, wait_up, worker_args, workers
from bench.procs import WorkerProcess, dev_server
from bench.provider_cost import CostSettings, ticker_spec
from bench.report import RESULTS_DIR, Row, machine, render_text, save_results
from overnight.core.grants import WRITABLE_BIND_ROOTS_ENV
from overnight.core.home import HOME_ENV
from overnight.demo.sample_demo import make_origin

GROUP = "localwatch"
PER = 1000


@dataclass(frozen=True)
class Settings:
    runs: int = 25
    window: float = 180.0
    idle: float = 15.0
    settle: float = 20.0
    poll_seconds: float = 60.0
    start_timeout: float = 300.0


@dataclass
class Reading:
    cpu: float
    rss: float
    at: float


def _read(worker: WorkerProcess) -> Reading:
    return Reading(worker.cpu_seconds(), worker.rss_mib(), time.monotonic())


async def measure(state_dir: Path, settings: Settings) -> dict[str, Any]:
    origin = make_origin(state_dir / "origin").origin
    tag = uuid.uuid4().hex[:6]
    cost = CostSettings(poll_seconds=settings.poll_seconds)
    async with dev_server(state_dir / "dev") as server:
        client = await Client.connect(
            server.address, namespace=server.namespace, data_converter=pydantic_data_converter
        )
        queues = {system: f"bench-localwatch-{system}-{tag}" for system in SYSTEMS}
        group = {
            system: WorkerProcess(
                worker_args(
                    system, "local", server.address, server.namespace, queues[system], 10_000
                ),
                state_dir / f"worker-{system}.log",
            )
            for system in SYSTEMS
        }
        async with workers(list(group.values())):
            idle_from = {s: _read(w) for s, w in group.items()}
            await asyncio.sleep(settings.idle)
            idle_to = {s: _read(w) for s, w in group.items()}
            runs = [
                BenchRun(
                    system,
                    "local",
                    "quiet",
                    ticker_spec(f"lw-{system[:2]}-{i}-{tag}", origin, "local", "quiet", cost),
                    queues[system],
                )
                for system in SYSTEMS
                for i in range(settings.runs)
            ]
            try:
                await start_runs(client, runs)
                late = await wait_up(client, runs, settings.start_timeout)
                await asyncio.sleep(settings.settle)
                before = {s: _read(w) for s, w in group.items()}
                await asyncio.sleep(settings.window)
                after = {s: _read(w) for s, w in group.items()}
            finally:
                await end_runs(client, runs, [None])
    cells = {}
    for system in SYSTEMS:
        idle_cpu = (idle_to[system].cpu - idle_from[system].cpu) / (
            idle_to[system].at - idle_from[system].at
        )
        seconds = after[system].at - before[system].at
        busy = (after[system].cpu - before[system].cpu) / seconds - idle_cpu
        up = settings.runs - sum(1 for run_id in late if f"-{system[:2]}-" in run_id)
        cells[system] = {
            "runs_up": up,
            "idle_cpu_per_second": round(idle_cpu, 5),
            "cpu_per_second": round(busy, 5),
            "cpu_per_thousand_percent": round(busy / max(1, up) * PER * 100, 2),
            "idle_rss_mib": round(idle_to[system].rss, 1),
            "rss_mib": round(after[system].rss, 1),
            "rss_per_thousand_mib": round(
                (after[system].rss - idle_to[system].rss) / max(1, up) * PER, 1
            ),
        }
    return {"settings": asdict(settings), "late_runs": late, "cells": cells}


def rows(found: dict[str, Any]) -> list[Row]:
    cells, s = found["cells"], found["settings"]
    on, bl = cells["overnight"], cells["baseline"]
    said = (
        f"{on['runs_up']} overnight / {bl['runs_up']} baseline quiet local runs at once, a "
        f"{s['window']:g} s window, poll_seconds {s['poll_seconds']:g}; scaled to {PER:,} runs"
    )
    found_rows = [
        Row(
            f"local worker CPU per {PER:,} quiet runs (inotify + pidfd vs the naive port)",
            "% core",
            bl["cpu_per_thousand_percent"],
            on["cpu_per_thousand_percent"],
            "ratio <= 1",
            ratio_at_most=1.0,
            note=f"{said}; worker CPU in the window minus its own idle CPU before any run",
        ),
        Row(
            f"local worker RSS per {PER:,} quiet runs",
            "MiB",
            bl["rss_per_thousand_mib"],
            on["rss_per_thousand_mib"],
            note=(
                f"{said}; RSS in the window minus the idle worker's "
                f"({on['idle_rss_mib']} MiB overnight, {bl['idle_rss_mib']} MiB baseline)"
            ),
        ),
    ]
    for row in found_rows:
        row.group = GROUP
    return found_rows


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.local_watch")
    parser.add_argument("--runs", type=int, default=Settings.runs, help="quiet runs per system")
    parser.add_argument("--window", type=float, default=Settings.window)
    parser.add_argument("--quick", action="store_true", help="2 runs, a 10 s window")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    settings = Settings(runs=args.runs, window=args.window)
    if args.quick:
        settings = Settings(runs=2, window=10, idle=2, settle=2, poll_seconds=4)
    began, started_at = time.monotonic(), datetime.now(UTC)
    state_dir = Path(tempfile.mkdtemp(prefix="overnight-bench-localwatch-"))
    os.environ[HOME_ENV] = str(state_dir / "home")
    # The workers bind the origin under `state_dir` writable: a grant of theirs.
    os.environ[WRITABLE_BIND_ROOTS_ENV] = str(state_dir.resolve())
    found = await measure(state_dir, settings)
    meta = {
        "command": "python -m bench.local_watch" + (" --quick" if args.quick else ""),
        "machine": machine(),
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - began),
        "state_dir": str(state_dir),
        "metrics": [GROUP],
    }
    found_rows = rows(found)
    _, json_path, _ = save_results(args.results, found_rows, {"local_watch": found}, meta)
    print(render_text(found_rows))
    print(f"wrote {json_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
