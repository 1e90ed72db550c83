"""Runs the chosen benchmarks, both systems side by side, and writes the results."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.crash import measure_crash
from bench.fleet_rows import fleet_rows
from bench.history import measure_history
from bench.key_limit import KeySettings, measure_key_limit
from bench.procs import dev_server
from bench.provider_cost import CostSettings, measure_provider_cost
from bench.provider_rows import cost_rows
from bench.report import RESULTS_DIR, SUITE, Row, machine, render_text, save_results
from bench.runtime_crash import measure_runtime_crash
from bench.runtime_fleet import FleetSettings, measure_runtime_fleet
from bench.scale import ScaleSettings, measure_scale
from overnight.core.grants import WRITABLE_BIND_ROOTS_ENV
from overnight.core.home import HOME_ENV

METRICS = SUITE


@dataclass(frozen=True)
class Plan:
    """How big each benchmark is: the full run or the quick one the test suite runs."""

    crash_samples: int
    poll_seconds: float
    direct_creates: int
    history_hours: float
    scale: ScaleSettings
    runtime_crash_samples: int
    cost: CostSettings
    key: KeySettings
    worker_cap: KeySettings
    fleet: FleetSettings

    @staticmethod
    def full() -> Plan:
        return Plan(
            crash_samples=20,
            poll_seconds=60,
            direct_creates=5,
            history_hours=6,
            scale=ScaleSettings(levels=[250, 500, 1000, 2000], first=1000, baseline_runs=250),
            runtime_crash_samples=10,
            cost=CostSettings(),
            key=KeySettings(),
            worker_cap=KeySettings(runs=60, workers=1, per_second=4, window=60),
            fleet=FleetSettings(),
        )

    @staticmethod
    def quick() -> Plan:
        return Plan(
            crash_samples=1,
            poll_seconds=2,
            direct_creates=1,
            history_hours=1,
            scale=ScaleSettings(
                levels=[4],
                baseline_runs=3,
                interval=(1.5, 3.0),
                poll_seconds=2,
                warmup=1,
                window=4,
                history_sample=10,
            ),
            runtime_crash_samples=1,
            cost=CostSettings(
                runs_per_kind=1,
                # Two or more looks of each ticking agent's checkpoints (a poll every 4 s).
                window=10,
                poll_seconds=4,
                tick=(2.0, 3.0),
                idle=1,
                settle=1,
                start_timeout=120,
            ),
            key=KeySettings(runs=2, workers=2, per_second=4, window=3, settle=1),
            worker_cap=KeySettings(runs=2, workers=1, per_second=4, window=3, settle=1),
            fleet=FleetSettings.quick(),
        )


@dataclass
class Outcome:
    rows: list[Row]
    details: dict[str, Any]
    json_path: Path
    md_path: Path


@dataclass
class Options:
    quick: bool = False
    only: set[str] = field(default_factory=lambda: set(METRICS))
    results_dir: Path | None = None
    # An already running server (the test suite's); else one is started from temporal-dev.yaml.
    address: str | None = None
    namespace: str = "default"
    # Set OVERNIGHT_HOME to a fresh folder for the local sandboxes (the CLI does).
    private_home: bool = True
    # Where worker logs, the dev server's database and the origin repo go (default: a new
    # temporary folder, kept for a look afterwards).
    state_dir: Path | None = None


async def run_bench(options: Options, out: Callable[[str], None] = print) -> Outcome:
    plan = Plan.quick() if options.quick else Plan.full()
    began, started_at = time.monotonic(), datetime.now(UTC)
    load_before = os.getloadavg()
    state_dir = options.state_dir or Path(tempfile.mkdtemp(prefix="overnight-bench-"))
    state_dir.mkdir(parents=True, exist_ok=True)
    if options.private_home:
        os.environ[HOME_ENV] = str(state_dir / "home")
    rows: list[Row] = []
    details: dict[str, Any] = {}
    if "history" in options.only:
        out(f"history cost: a healthy {plan.history_hours:g} h run on the time-skipping server")
        found, details["history"] = await measure_history(hours=plan.history_hours)
        rows += _grouped(found, "history")
    if options.only & {"crash", "recovery", "scale", "requests"}:
        async with _server(options, state_dir) as (client, address, server_pid):
            if options.only & {"crash", "recovery"}:
                out(f"crash and recovery: {plan.crash_samples} runs each, both at once")
                found, details["crash"] = await measure_crash(
                    client,
                    address,
                    state_dir,
                    samples=plan.crash_samples,
                    poll_seconds=plan.poll_seconds,
                    direct_samples=plan.direct_creates,
                )
                rows = _only(found, options.only) + rows
            if "crash" in options.only:
                out(f"crash on runtime: {plan.runtime_crash_samples} runs each, both at once")
                found, details["runtime_crash"] = await measure_runtime_crash(
                    client,
                    address,
                    state_dir,
                    samples=plan.runtime_crash_samples,
                    poll_seconds=plan.poll_seconds,
                )
                rows += _grouped(found, "crash")
            if "scale" in options.only:
                out(f"scale: levels {plan.scale.levels} on one worker process")
                found, details["scale"] = await measure_scale(
                    client, address, server_pid, state_dir, plan.scale
                )
                rows += _grouped(found, "scale")
            if "requests" in options.only:
                rows += _grouped(
                    await _requests(client, address, state_dir, plan, details, out), "requests"
                )
    if "fleet" in options.only:
        fleet = plan.fleet
        out(f"runtime fleet: {fleet.runs} runs on one key, {fleet.workers} worker processes")
        details["fleet"] = await measure_runtime_fleet(state_dir, fleet, out)
        rows += _grouped(fleet_rows(details["fleet"]), "fleet")
    meta = {
        "command": "python -m bench"
        + (" --quick" if options.quick else "")
        + "".join(
            f" --only {m}" for m in METRICS if m in options.only and options.only != set(METRICS)
        ),
        "machine": machine(),
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - began),
        "load_average_before": [round(x, 2) for x in load_before],
        "state_dir": str(state_dir),
        "metrics": sorted(options.only),
    }
    folder = options.results_dir or (state_dir / "results" if options.quick else RESULTS_DIR)
    rows, json_path, md_path = save_results(folder, rows, details, meta, out)
    out(render_text(rows))
    out(f"wrote {json_path} and {md_path} ({meta['wall_seconds']} s)")
    return Outcome(rows, details, json_path, md_path)


async def _requests(
    client: Client,
    address: str,
    state_dir: Path,
    plan: Plan,
    details: dict[str, Any],
    out: Callable[[str], None],
) -> list[Row]:
    """Provider cost, then the key checks; each stage's figures are saved as soon as they are
    measured (`requests-details.json`), and a failed key check loses only its own rows."""
    cost = plan.cost
    out(
        f"provider cost: {cost.runs_per_kind} runs per agent kind, system and provider; "
        f"a {cost.window:g} s window"
    )
    details["requests"] = await measure_provider_cost(client, address, state_dir, cost, out)
    saved = state_dir / "requests-details.json"
    saved.write_text(json.dumps(details["requests"], indent=1, default=str))
    checks: dict[str, dict[str, Any] | None] = {}
    for name, settings in (("key_limit", plan.key), ("worker_cap", plan.worker_cap)):
        out(f"{name}: {settings.runs} runtime runs on one key, {settings.workers} worker(s)")
        try:
            checks[name] = await measure_key_limit(client, address, state_dir, settings, cost, out)
        except Exception as error:  # noqa: BLE001 - reported; the other rows still count
            out(f"{name} failed: {error!r}")
            details[f"{name}_error"] = repr(error)
            checks[name] = None
        details[name] = checks[name]
        saved.write_text(json.dumps(details, indent=1, default=str))
    return cost_rows(details["requests"], checks["key_limit"], checks["worker_cap"])


def _grouped(rows: list[Row], group: str) -> list[Row]:
    for row in rows:
        row.group = group
    return rows


def _only(rows: list[Row], only: set[str]) -> list[Row]:
    """Crash rows for `crash`, recovery rows for `recovery` (both come from the same runs)."""
    for row in rows:
        row.group = "recovery" if "recovery" in row.metric else "crash"
    return [row for row in rows if row.group in only]


@asynccontextmanager
async def _server(
    options: Options, state_dir: Path
) -> AsyncIterator[tuple[Client, str, int | None]]:
    # The bench's workers (here and in child processes) bind the origins under `state_dir`
    # writable: a grant of the worker's (overnight/core/grants.py), for the stack's life only.
    before = os.environ.get(WRITABLE_BIND_ROOTS_ENV)
    os.environ[WRITABLE_BIND_ROOTS_ENV] = str(state_dir.resolve())
    try:
        if options.address is not None:
            client = await _connect(options.address, options.namespace)
            yield client, options.address, None
            return
        async with dev_server(state_dir) as server:
            client = await _connect(server.address, server.namespace)
            pid = server.process.pid if server.process is not None else None
            yield client, server.address, pid
    finally:
        if before is None:
            os.environ.pop(WRITABLE_BIND_ROOTS_ENV, None)
        else:
            os.environ[WRITABLE_BIND_ROOTS_ENV] = before


async def _connect(address: str, namespace: str) -> Client:
    return await asyncio.wait_for(
        Client.connect(address, namespace=namespace, data_converter=pydantic_data_converter),
        timeout=30,
    )
