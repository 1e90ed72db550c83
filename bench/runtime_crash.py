"""Crash-to-noticed on the runtime provider, overnight beside the baseline.

As `bench.crash` does for the local provider: the sample agent crashes after step 2 at a
random moment spread over one poll interval, `samples` runs per system, all at once. Here the
sandboxes are the fake Runtime API's (`bench.runtime_world`; real `withruntime` SDK in the
workers, the real API's limits), which keeps them as local sandboxes in its own home, so the
exit can be read where the launcher recorded it.

exited: the first sandbox's agent process's exit as its launcher recorded it (on Runtime the
agent runs inside overnight's exit-marker wrapper, so this is the wrapper's exit, a few
milliseconds after the agent's own); noticed: the first `RestartRecord.at` of the run's status.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from temporalio.client import Client

from activities.providers.local.engine import LocalEngine
from activities.providers.local.procs import read_record
from bench.crash import AGENT_COMMAND, DIE_AFTER_STEP, FIRST_CRASH_SECONDS
from bench.fleet import (
    SYSTEMS,
    BenchRun,
    Seen,
    end_runs,
    start_runs,
    statuses,
    worker_args,
    workers,
)
from bench.procs import WorkerProcess
from bench.report import Row, percentile, summarize
from bench.runtime_world import bench_spec, worker_env
from fakes.runtime import FakeRuntime
from overnight.demo.outside_world import ledger_url
from overnight.demo.sample_demo import AGENT_DIR, make_origin


async def measure_runtime_crash(
    client: Client, address: str, state_dir: Path, *, samples: int, poll_seconds: float
) -> tuple[list[Row], dict[str, Any]]:
    files = make_origin(state_dir / "runtime-crash-origin")
    home = state_dir / "runtime-home-crash"
    rng = random.Random(2)
    low = FIRST_CRASH_SECONDS / DIE_AFTER_STEP
    tag = uuid.uuid4().hex[:6]
    queues = {system: f"bench-rtcrash-{system}-{tag}" for system in SYSTEMS}
    runs = []
    for system in SYSTEMS:
        for i in range(samples):
            delay = rng.uniform(low, low + poll_seconds / DIE_AFTER_STEP)
            run_id = f"rtcrash-{system[:2]}-{i}-{tag}"
            spec = bench_spec(
                run_id,
                files.origin,
                "runtime",
                agent_dir=str(AGENT_DIR),
                command=AGENT_COMMAND,
                env={
                    "OVERNIGHT_LEDGER_URL": ledger_url(files.ledger),
                    "AGENT_DIE_AFTER": str(DIE_AFTER_STEP),
                    "AGENT_STEP_DELAY": f"{delay:.3f}",
                },
                poll_seconds=poll_seconds,
                sandbox_timeout_seconds=600,
            )
            runs.append(BenchRun(system, "runtime", "crash", spec, queues[system]))
    spans: dict[str, list[float]] = {system: [] for system in SYSTEMS}
    missing: list[str] = []
    async with AsyncExitStack() as stack:
        fake = await stack.enter_async_context(FakeRuntime.local(home, api_key=f"crash-{tag}"))
        env = worker_env(fake, state_dir / "config")
        group = [
            WorkerProcess(
                worker_args(system, "runtime", address, client.namespace, queues[system], 100),
                state_dir / f"rtcrash-worker-{system}.log",
                env=env,
            )
            for system in SYSTEMS
        ]
        await stack.enter_async_context(workers(group))
        try:
            await start_runs(client, runs)
            found = await _wait_noticed(client, runs, FIRST_CRASH_SECONDS + 2 * poll_seconds + 90)
        finally:
            await end_runs(client, runs, [])
    engine = LocalEngine(home)
    for run in runs:
        status = found.get(run.run_id)
        restarts = status.restarts if status is not None else []
        exited = _exit_of(engine, restarts[0].sandbox_id) if restarts else None
        if exited is None:
            missing.append(run.run_id)
            continue
        spans[run.system].append(restarts[0].at.timestamp() - exited)
    return _rows(spans, missing), {
        "poll_seconds": poll_seconds,
        "incomplete_samples": missing,
        "overnight": summarize(spans["overnight"]),
        "baseline": summarize(spans["baseline"]),
    }


async def _wait_noticed(
    client: Client, runs: list[BenchRun], timeout: float
) -> dict[str, Seen | None]:
    deadline = time.monotonic() + timeout
    while True:
        found = await statuses(client, runs)
        done = all(status is not None and status.restarts for status in found.values())
        if done or time.monotonic() > deadline:
            return found
        await asyncio.sleep(1.0)


def _exit_of(engine: LocalEngine, sandbox_id: str | None) -> float | None:
    """When the sample agent's process in this sandbox ended, as its launcher recorded it."""
    if sandbox_id is None:
        return None
    folder = engine.folder(sandbox_id) / "processes"
    ends = []
    for proc_dir in folder.iterdir() if folder.is_dir() else []:
        record = read_record(proc_dir)
        if "agent/main.py" in record.command and record.ended_at is not None:
            ends.append(record.ended_at)
    return min(ends) if ends else None


def _rows(spans: dict[str, list[float]], missing: list[str]) -> list[Row]:
    def at(values: list[float], q: float) -> float | None:
        return round(percentile(values, q), 3) if values else None

    ours, theirs = spans["overnight"], spans["baseline"]
    return [
        Row(
            "crash-to-noticed on runtime, median",
            "s",
            at(theirs, 50),
            at(ours, 50),
            "<= 2 s",
            at_most=2.0,
            note=(
                f"{len(ours)} overnight / {len(theirs)} baseline samples on the fake Runtime API"
                + (f"; {len(missing)} incomplete" if missing else "")
            ),
        ),
        Row("crash-to-noticed on runtime, p95", "s", at(theirs, 95), at(ours, 95)),
    ]
