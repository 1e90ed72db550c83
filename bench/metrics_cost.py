"""What serving metrics costs: crash-to-noticed and billable actions, metrics off vs on.

`python -m bench.metrics_cost [--samples N] [--poll-seconds S] [--hours H]` (rows of group
`metrics`, kept by later suite runs). In each row the baseline column is overnight with
metrics off, the overnight column the same code with them on:

- crash-to-noticed: two `python worker.py` processes on one dev server, real local sandboxes
  and the sample agent crashing after step 2 at a random moment (as in bench/crash.py), half
  the runs on each worker, all at once. One worker serves metrics (`OVERNIGHT_METRICS_ADDRESS`,
  the runs-by-state count every second), scraped once a second here; the other has none.
- billable actions / supervised hour: one healthy run of `--hours` on the time-skipping server
  (bench/history.py's world), once with a runtime serving Prometheus metrics and once with no
  metrics at all; actions counted from each history the same way (heartbeats estimated).
  Metric calls add no command, so the run's own commands must be equal, but for the world's
  timing: whether a 10-minute `OvernightLastProgress` upsert falls in or out of the run moves
  one action either way (measured: 119 vs 118, then 118 vs 119, in 6 h). Activity retries
  (the time-skipping server timing out on a loaded machine) are counted apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import (
    LoggingConfig,
    PrometheusConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from bench.actions import count_history
from bench.crash import (
    DIE_AFTER_STEP,
    FIRST_CRASH_SECONDS,
    CrashSample,
    _clean_up,
    _read_times,
    _wait_running_again,
    crash_spec,
)
from bench.history import (
    CHECKPOINT_EVERY_SECONDS,
    _chain,
    _register_search_attributes,
    healthy_spec,
)
from bench.history_world import HealthyAgentWorld
from bench.procs import dev_server
from bench.report import RESULTS_DIR, Row, machine, percentile, render_text, save_results
from overnight.core.constants import WORKFLOW_TYPE
from overnight.core.grants import WRITABLE_BIND_ROOTS_ENV
from overnight.core.home import HOME_ENV
from overnight.demo.sample_demo import make_origin
from overnight.worker import binaries
from overnight.worker.devserver import DevServer
from overnight.worker.telemetry import METRICS_ADDRESS_ENV, RUNS_EVERY_ENV
from workflows.agent_run import AgentRun

REPO_ROOT = Path(__file__).resolve().parent.parent
SETTINGS = ("off", "on")


@asynccontextmanager
async def worker(
    server: DevServer, queue: str, log: Path, metrics_port: int | None
) -> AsyncIterator[None]:
    """`python worker.py` on `queue`, serving metrics on `metrics_port` when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TEMPORAL_"))}
    env.pop(METRICS_ADDRESS_ENV, None)
    env |= {"TEMPORAL_ADDRESS": server.address, "TEMPORAL_NAMESPACE": server.namespace}
    if metrics_port is not None:
        env |= {METRICS_ADDRESS_ENV: f"127.0.0.1:{metrics_port}", RUNS_EVERY_ENV: "1"}
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, str(REPO_ROOT / "worker.py"), "--task-queue", queue],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while "worker polling" not in log.read_text():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the worker did not start: see {log}")
            await asyncio.sleep(0.1)
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, 30)
        except subprocess.TimeoutExpired:
            process.kill()


async def scrape(port: int, stop: asyncio.Event) -> int:
    """Read /metrics once a second, as a Prometheus would; how many times it was read."""
    reads = 0
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    url = f"http://127.0.0.1:{port}/metrics"
    while not stop.is_set():
        await asyncio.to_thread(lambda: opener.open(url, timeout=5).read())
        reads += 1
        try:
            await asyncio.wait_for(stop.wait(), 1)
        except TimeoutError:
            pass
    return reads


async def measure_crash_to_noticed(
    state_dir: Path, samples: int, poll_seconds: float, seed: int = 1
) -> dict[str, list[float]]:
    """Crash-to-noticed seconds of each complete sample, by setting (metrics off / on)."""
    files = make_origin(state_dir / "origin")
    rng = random.Random(seed)
    low = FIRST_CRASH_SECONDS / DIE_AFTER_STEP
    runs: dict[str, list[CrashSample]] = {
        setting: [
            CrashSample(WORKFLOW_TYPE, f"metrics-{setting}-{i}-{uuid.uuid4().hex[:6]}", delay)
            for i in range(samples)
            for delay in [rng.uniform(low, low + poll_seconds / DIE_AFTER_STEP)]
        ]
        for setting in SETTINGS
    }
    os.environ[WRITABLE_BIND_ROOTS_ENV] = str(state_dir.resolve())
    async with dev_server(state_dir) as server:
        client = await Client.connect(
            server.address, namespace=server.namespace, data_converter=pydantic_data_converter
        )
        queues = {setting: f"metrics-{setting}-{uuid.uuid4().hex[:6]}" for setting in SETTINGS}
        port = _free_port()
        stop = asyncio.Event()
        everything = [run for setting in SETTINGS for run in runs[setting]]
        async with (
            worker(server, queues["off"], state_dir / "worker-off.log", None),
            worker(server, queues["on"], state_dir / "worker-on.log", port),
        ):
            scraper = asyncio.create_task(scrape(port, stop))
            try:
                await asyncio.gather(
                    *(
                        client.start_workflow(
                            WORKFLOW_TYPE,
                            crash_spec(run.run_id, files, run.step_delay, poll_seconds),
                            id=run.run_id,
                            task_queue=queues[setting],
                        )
                        for setting in SETTINGS
                        for run in runs[setting]
                    )
                )
                give_up = FIRST_CRASH_SECONDS + 2 * poll_seconds + 60
                await _wait_running_again(everything, deadline=time.monotonic() + give_up)
                for run in everything:
                    await _read_times(client, run)
            finally:
                stop.set()
                await scraper
                await _clean_up(client, everything)
    return {
        setting: [
            run.span(run.exited_at, run.noticed_at)
            for run in runs[setting]
            if run.exited_at is not None and run.noticed_at is not None
        ]
        for setting in SETTINGS
    }


async def measure_actions(hours: float) -> dict[str, dict[str, Any]]:
    """Billable actions per supervised hour of one healthy run, by setting: all of them, and
    those of the run's own commands (no activity retries, no heartbeats: on a loaded machine
    the time-skipping server times out now and then, and the retries differ run to run)."""
    found: dict[str, dict[str, Any]] = {}
    for setting in SETTINGS:
        # The SDK's warnings about the test server's version say nothing about the bench.
        quiet = LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
        telemetry = TelemetryConfig(logging=quiet)
        if setting == "on":
            prometheus = PrometheusConfig(bind_address=f"127.0.0.1:{_free_port()}")
            telemetry = TelemetryConfig(logging=quiet, metrics=prometheus)
        env = await WorkflowEnvironment.start_time_skipping(
            data_converter=pydantic_data_converter,
            test_server_existing_path=str(binaries.test_server_path()),
            runtime=Runtime(telemetry=telemetry),
        )
        try:
            await _register_search_attributes(env.client)
            world = HealthyAgentWorld(env, hours=hours, checkpoint_every=CHECKPOINT_EVERY_SECONDS)
            queue = f"metrics-history-{uuid.uuid4().hex[:8]}"
            run_id = f"metrics-history-{setting}-{uuid.uuid4().hex[:6]}"
            async with Worker(
                env.client,
                task_queue=queue,
                workflows=[AgentRun],
                activities=world.activities(),
                max_heartbeat_throttle_interval=timedelta(0),
            ):
                handle = await env.client.start_workflow(
                    WORKFLOW_TYPE, healthy_spec(run_id, hours), id=run_id, task_queue=queue
                )
                await handle.result()
            chain = await _chain(env.client, run_id, handle.first_execution_run_id)
        finally:
            await env.shutdown()
        cost = count_history(chain)
        commands = cost.actions_in_history - cost.actions.get("activity retry", 0)
        found[setting] = {
            "total": round(cost.total_actions / hours, 1),
            "commands": round(commands / hours, 1),
            "activity_retries": round(cost.actions.get("activity retry", 0) / hours, 1),
            "by_kind": dict(sorted(cost.actions.items())),
        }
    return found


def result_rows(noticed: dict[str, list[float]], actions: dict[str, dict[str, Any]]) -> list[Row]:
    def median(values: list[float]) -> float | None:
        return round(percentile(values, 50), 3) if values else None

    off, on = noticed["off"], noticed["on"]
    rows = [
        Row(
            "crash-to-noticed, metrics off vs on, median",
            "s",
            median(off),
            median(on),
            "<= 2 s",
            at_most=2.0,
            note=f"{len(off)} off / {len(on)} on samples; baseline column: metrics off",
        ),
        Row(
            "billable actions / supervised hour, metrics off vs on",
            "actions",
            actions["off"]["total"],
            actions["on"]["total"],
            "",
            note=(
                "baseline column: metrics off; heartbeats estimated; activity retries "
                f"{actions['off']['activity_retries']}/h off, "
                f"{actions['on']['activity_retries']}/h on"
            ),
        ),
        Row(
            "billable actions of the run's commands / hour, metrics off vs on",
            "actions",
            actions["off"]["commands"],
            actions["on"]["commands"],
            "ratio <= 1.01",
            ratio_at_most=1.01,
            note=(
                "no activity retries, no heartbeats: what the workflow code decides; the "
                "healthy world's timing moves one OvernightLastProgress upsert either way"
            ),
        ),
    ]
    for row in rows:
        row.group = "metrics"
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.metrics_cost")
    parser.add_argument("--samples", type=int, default=10, help="crash runs per setting")
    parser.add_argument("--poll-seconds", type=float, default=60)
    parser.add_argument("--hours", type=float, default=6, help="the healthy run's length")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder for latest.json")
    args = parser.parse_args(argv)
    began, started_at = time.monotonic(), datetime.now(UTC)
    state_dir = Path(tempfile.mkdtemp(prefix="overnight-bench-metrics-"))
    os.environ[HOME_ENV] = str(state_dir / "home")
    noticed = asyncio.run(measure_crash_to_noticed(state_dir, args.samples, args.poll_seconds))
    actions = asyncio.run(measure_actions(args.hours))
    rows = result_rows(noticed, actions)
    details: dict[str, Any] = {
        "metrics_cost": {
            "crash_to_noticed": {k: [round(v, 4) for v in vs] for k, vs in noticed.items()},
            "actions_per_hour": actions,
            "poll_seconds": args.poll_seconds,
            "hours": args.hours,
        }
    }
    meta = {
        "command": "python -m bench.metrics_cost"
        + "".join(
            f" --{name.replace('_', '-')} {value:g}"
            for name, value, default in (
                ("samples", args.samples, 10),
                ("poll_seconds", args.poll_seconds, 60),
                ("hours", args.hours, 6),
            )
            if value != default
        ),
        "machine": machine(),
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - began),
        "state_dir": str(state_dir),
        "metrics": ["metrics"],
    }
    _, json_path, _ = save_results(args.results, rows, details, meta)
    print(json.dumps(details["metrics_cost"]["actions_per_hour"]))
    print(render_text(rows))
    print(f"wrote {json_path}")
    return 0 if all(row.passed for row in rows) else 1


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


if __name__ == "__main__":
    raise SystemExit(main())
