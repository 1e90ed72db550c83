"""Metric 4, scale: how many runs one worker process supervises with a tick lag p99 <= 2 s.

One worker process (`bench.worker_main`, i.e. overnight's own `serve`) on the dev server; its
sandboxes are `fakes.provider.FakeProvider`'s virtual agents, each writing a new checkpoint
every 30-60 s.
The number of runs moves through levels (250, 500, 1000, 2000): it starts at `first`, climbs
while levels pass and, if `first` fails, steps down until one passes (runs are terminated to
go down; bringing 1,000 runs up costs this machine more than a minute, so the search starts
high). At each level, after a warm-up, a window is measured: tick lag (`bench.ticklag`, from
the histories of a sample of runs), the worker's CPU, the server's and everyone else's on the
machine, the worker's RSS and the heartbeats it sent (the SDK's own request counter), and what
the sampled runs wrote (workflow tasks, activities, upserts, timers, markers per run-hour). A
level passes when every change in the window was recorded and the p99 lag past due is <= 2 s:
overnight's observe holds checkpoint news until `poll_seconds` into each look by design, so its
lag runs from the change or that point, whichever is later (see bench/ticklag.py); the
baseline's from the change.

How a level is judged, and the rows: bench/scale_results.py.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from bench.baseline import BASELINE_WORKFLOW
from bench.procs import WorkerProcess, busy_cpu_seconds, cpu_seconds, worker_process
from bench.report import Row, summarize
from bench.scale_results import Level, SystemScale, describe, scale_rows
from bench.ticklag import tick_lags
from fakes.provider import read_schedules
from overnight.core.constants import WORKFLOW_TYPE
from overnight.core.models import RunSpec
from overnight.demo.sample_demo import AGENT_DIR

START_CONCURRENCY = 50
# A level whose runs are not all up by then is measured as it is (and fails).
AGENTS_START_TIMEOUT = 150.0
HEARTBEAT_REQUESTS = ("temporal_request", "RecordActivityTaskHeartbeat")


@dataclass(frozen=True)
class ScaleSettings:
    levels: list[int]
    baseline_runs: int
    # Where the search starts (default: the smallest level).
    first: int | None = None
    interval: tuple[float, float] = (30.0, 60.0)
    poll_seconds: float = 60.0
    warmup: float = 10.0
    window: float = 60.0
    # The baseline works once per poll: its window is one poll long (None: poll_seconds).
    baseline_window: float | None = None
    history_sample: int = 300


@dataclass(frozen=True)
class _Where:
    client: Client
    address: str
    server_pid: int | None
    state_dir: Path


def fake_spec(run_id: str, poll_seconds: float) -> RunSpec:
    return RunSpec(
        run_id=run_id,
        repo="/fake/app.git",
        agent_dir=str(AGENT_DIR),
        command="virtual agent",
        poll_seconds=poll_seconds,
        sandbox_timeout_seconds=6 * 3600,
    )


async def measure_scale(
    client: Client,
    address: str,
    server_pid: int | None,
    state_dir: Path,
    settings: ScaleSettings,
) -> tuple[list[Row], dict[str, Any]]:
    """`server_pid`: the dev server's process, to report its CPU too (None: not measured)."""
    started = time.monotonic()
    where = _Where(client, address, server_pid, state_dir)
    baseline = await _climb(where, BASELINE_WORKFLOW, [settings.baseline_runs], None, settings)
    overnight = await _climb(where, WORKFLOW_TYPE, settings.levels, settings.first, settings)
    details = {
        "settings": asdict(settings),
        "wall_seconds": round(time.monotonic() - started, 1),
        "overnight": describe(overnight),
        "baseline": describe(baseline),
    }
    return scale_rows(overnight, baseline), details


async def _climb(
    where: _Where, system: str, levels: list[int], first: int | None, settings: ScaleSettings
) -> SystemScale:
    tag = "overnight" if system == WORKFLOW_TYPE else "baseline"
    log = where.state_dir / f"scale-{tag}-agents.jsonl"
    queue = f"bench-scale-{tag}-{uuid.uuid4().hex[:6]}"
    args = ["--system", tag, "--provider", "fake", "--address", where.address]
    args += ["--namespace", where.client.namespace, "--task-queue", queue]
    args += ["--max-runs", str(max(levels)), "--fake-log", str(log)]
    args += ["--fake-interval", *(str(s) for s in settings.interval)]
    result = SystemScale(system)
    run_ids: list[str] = []
    worker_log = where.state_dir / f"scale-worker-{tag}.log"
    async with worker_process(args, worker_log, metrics=True) as worker:
        await asyncio.sleep(1)
        result.idle_rss_mib = worker.rss_mib()
        runner = _Runner(where, worker, system, queue, log, run_ids, settings)
        try:
            start = first if first is not None else min(levels)
            for runs in [n for n in sorted(levels) if n >= start]:
                result.levels.append(await runner.level(runs))
                if not result.levels[-1].passed:
                    break
            if not any(level.passed for level in result.levels):
                for runs in [n for n in sorted(levels, reverse=True) if n < start]:
                    await _terminate(where.client, run_ids[runs:])
                    del run_ids[runs:]
                    result.levels.append(await runner.level(runs))
                    if result.levels[-1].passed:
                        break
        finally:
            await _terminate(where.client, run_ids)
    return result


@dataclass
class _Runner:
    where: _Where
    worker: WorkerProcess
    system: str
    queue: str
    log: Path
    run_ids: list[str]
    settings: ScaleSettings

    async def level(self, runs: int) -> Level:
        """Bring the runs up (or down) to `runs`, let them settle, measure one window."""
        where, worker, settings = self.where, self.worker, self.settings
        overnight = self.system == WORKFLOW_TYPE
        window = settings.window if overnight else settings.baseline_window or settings.poll_seconds
        # Both may hold a change up to a poll (the baseline until its next one, overnight's
        # observe until its report point): let one pass before reading the histories.
        settle = settings.poll_seconds + 3
        level = Level(runs=runs)
        clock, cpu, server_cpu = time.monotonic(), worker.cpu_seconds(), _cpu(where.server_pid)
        await _start_runs(where.client, self.system, self.queue, self.run_ids, runs, settings)
        level.seconds["start"] = round(time.monotonic() - clock, 1)
        level.all_started = await _agents_started(self.log, self.run_ids)
        level.seconds["agents_started"] = round(time.monotonic() - clock, 1)
        # CPU seconds spent bringing the new runs up (workflow starts, first tasks).
        level.seconds["worker_cpu_starting"] = round(worker.cpu_seconds() - cpu, 1)
        level.seconds["server_cpu_starting"] = round(_cpu(where.server_pid) - server_cpu, 1)
        await asyncio.sleep(settings.warmup)
        await _measure_window(worker, where.server_pid, level, window)
        await asyncio.sleep(settle)
        clock = time.monotonic()
        sample = random.Random(runs).sample(self.run_ids, min(runs, settings.history_sample))
        schedules = read_schedules(self.log)
        report_every = settings.poll_seconds if overnight else None
        lags = await tick_lags(
            where.client, self.system, sample, schedules, level.window, report_every
        )
        level.seconds["read_histories"] = round(time.monotonic() - clock, 1)
        level.lag, level.missed = summarize(lags.total), lags.missed
        level.lag_watch, level.lag_deliver = summarize(lags.watch), summarize(lags.deliver)
        level.lag_late = summarize(lags.late)
        elapsed = level.window[1] - level.window[0]
        if lags.runs and elapsed > 0:
            level.events_per_run_hour = {
                kind: round(count / lags.runs / elapsed * 3600, 1)
                for kind, count in sorted(lags.events.items())
            }
        level.worker_exit_code = worker.exit_code()
        return level


async def _start_runs(
    client: Client,
    system: str,
    queue: str,
    run_ids: list[str],
    total: int,
    settings: ScaleSettings,
) -> None:
    gate = asyncio.Semaphore(START_CONCURRENCY)

    async def start(run_id: str) -> None:
        async with gate:
            spec = fake_spec(run_id, settings.poll_seconds)
            await client.start_workflow(system, spec, id=run_id, task_queue=queue)

    new = [f"scale-{uuid.uuid4().hex[:10]}" for _ in range(total - len(run_ids))]
    run_ids.extend(new)
    await asyncio.gather(*(start(run_id) for run_id in new))


async def _agents_started(log: Path, run_ids: list[str]) -> bool:
    """Whether the agent of every run in `run_ids` has started (within the timeout)."""
    wanted = {f"{run_id}-1" for run_id in run_ids}
    deadline = time.monotonic() + AGENTS_START_TIMEOUT
    while time.monotonic() < deadline:
        if wanted <= read_schedules(log).keys():
            return True
        await asyncio.sleep(0.5)
    return False


async def _measure_window(
    worker: WorkerProcess, server_pid: int | None, level: Level, window: float
) -> None:
    metric, operation = HEARTBEAT_REQUESTS
    beats_before = worker.metric_total(metric, operation=operation)
    worker_before, server_before = worker.cpu_seconds(), _cpu(server_pid)
    busy_before, began = busy_cpu_seconds(), time.time()
    await asyncio.sleep(window)
    ended = time.time()
    elapsed = ended - began
    level.window = (began, ended)
    worker_cpu = worker.cpu_seconds() - worker_before
    server_cpu = _cpu(server_pid) - server_before
    level.worker_cores = round(worker_cpu / elapsed, 3)
    if server_pid is not None:
        level.server_cores = round(server_cpu / elapsed, 3)
        others = busy_cpu_seconds() - busy_before - worker_cpu - server_cpu
        level.other_cores = round(others / elapsed, 3)
    level.worker_rss_mib = round(worker.rss_mib(), 1)
    beats_after = worker.metric_total(metric, operation=operation)
    if beats_before is not None and beats_after is not None:
        per_hour = (beats_after - beats_before) / level.runs / elapsed * 3600
        level.heartbeats_per_run_hour = round(per_hour, 1)


def _cpu(pid: int | None) -> float:
    return cpu_seconds(pid) if pid is not None else 0.0


async def _terminate(client: Client, run_ids: list[str]) -> None:
    gate = asyncio.Semaphore(START_CONCURRENCY)

    async def stop(run_id: str) -> None:
        async with gate:
            try:
                await client.get_workflow_handle(run_id).terminate("benchmark over")
            except RPCError:
                pass

    await asyncio.gather(*(stop(run_id) for run_id in run_ids))
