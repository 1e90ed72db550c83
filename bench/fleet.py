"""Many benchmark runs of both systems: workers, starting, waiting until up, and cleaning up.

Each (system, provider, ...) group of runs has a worker process of its own
(`bench.worker_main`) on a task queue of its own, so its CPU is its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from activities.providers.local.engine import LocalEngine
from bench.baseline import BASELINE_WORKFLOW
from bench.procs import WorkerProcess
from overnight.core.constants import LABEL_RUN, WORKFLOW_TYPE
from overnight.core.models import RunSpec

WORKFLOWS = {"overnight": WORKFLOW_TYPE, "baseline": BASELINE_WORKFLOW}
SYSTEMS = ("overnight", "baseline")
QUERY_TIMEOUT_SECONDS = 10.0


@dataclass
class BenchRun:
    system: str  # "overnight" or "baseline"
    provider: str
    kind: str
    spec: RunSpec
    queue: str

    @property
    def run_id(self) -> str:
        return self.spec.run_id


def worker_args(
    system: str, provider: str, address: str, namespace: str, queue: str, max_runs: int
) -> list[str]:
    return [
        *("--system", system, "--provider", provider, "--address", address),
        *("--namespace", namespace, "--task-queue", queue, "--max-runs", str(max_runs)),
    ]


@asynccontextmanager
async def workers(group: Sequence[WorkerProcess]) -> AsyncIterator[Sequence[WorkerProcess]]:
    """Start all at once (each waits until it polls); stop all afterwards."""
    try:
        await asyncio.gather(*(worker.start() for worker in group))
        yield group
    finally:
        await asyncio.gather(*(worker.stop() for worker in group), return_exceptions=True)


async def start_runs(
    client: Client, runs: Sequence[BenchRun], *, per_second: float | None = None
) -> None:
    """Start every run; `per_second` spreads the starts evenly (else all at once)."""
    began = time.monotonic()
    tasks = []
    for i, run in enumerate(runs):
        if per_second:
            await asyncio.sleep(max(0.0, began + i / per_second - time.monotonic()))
        tasks.append(
            asyncio.create_task(
                client.start_workflow(
                    WORKFLOWS[run.system], run.spec, id=run.run_id, task_queue=run.queue
                )
            )
        )
    await asyncio.gather(*tasks)


@dataclass(frozen=True)
class Restart:
    at: datetime
    sandbox_id: str | None


@dataclass(frozen=True)
class Seen:
    """The few fields of either system's `status` a benchmark needs, read leniently: the
    workers may run a newer `RunStatus` than this process imported."""

    state: str | None
    process_id: str | None
    restarts: list[Restart]

    @classmethod
    def parse(cls, value: Any) -> Seen | None:
        if not isinstance(value, dict):
            return None
        restarts = [
            Restart(datetime.fromisoformat(r["at"]), r.get("sandbox_id"))
            for r in value.get("restarts") or []
        ]
        return cls(value.get("state"), value.get("process_id"), restarts)


async def status_of(client: Client, run: BenchRun) -> Seen | None:
    handle = client.get_workflow_handle(run.run_id)
    try:
        answer = await asyncio.wait_for(
            handle.query("status", result_type=dict), timeout=QUERY_TIMEOUT_SECONDS
        )
    except (RPCError, TimeoutError):
        return None
    return Seen.parse(answer)


def is_up(run: BenchRun, status: Seen | None) -> bool:
    """Its agent has been started (overnight: and the run says it is running)."""
    if status is None or status.process_id is None:
        return False
    return run.system != "overnight" or status.state == "running"


async def wait_up(client: Client, runs: Sequence[BenchRun], timeout: float) -> list[str]:
    """Wait until every run is up; the ids of those that were not by `timeout`."""
    waiting = list(runs)
    deadline = time.monotonic() + timeout
    while waiting and time.monotonic() < deadline:
        found = await asyncio.gather(*(status_of(client, run) for run in waiting))
        waiting = [
            run for run, status in zip(waiting, found, strict=True) if not is_up(run, status)
        ]
        if waiting:
            await asyncio.sleep(1.0)
    return [run.run_id for run in waiting]


async def statuses(client: Client, runs: Sequence[BenchRun]) -> dict[str, Seen | None]:
    found = await asyncio.gather(*(status_of(client, run) for run in runs))
    return {run.run_id: status for run, status in zip(runs, found, strict=True)}


async def end_runs(client: Client, runs: Iterable[BenchRun], homes: Sequence[Path | None]) -> None:
    """Terminate every run (benchmarks keep no result), then stop their sandboxes in the local
    engines at `homes` (None: $OVERNIGHT_HOME)."""
    ids = [run.run_id for run in runs]

    async def terminate(run_id: str) -> None:
        with contextlib.suppress(RPCError):
            await client.get_workflow_handle(run_id).terminate("benchmark over")

    await asyncio.gather(*(terminate(run_id) for run_id in ids))
    for home in homes:
        engine = LocalEngine(home)
        for run_id in ids:
            for meta in engine.list_sandboxes({LABEL_RUN: run_id}, include_stopped=False):
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(engine.stop, meta.id)


def counts_per_hour(total: float, runs: int, seconds: float) -> float | None:
    """A count over `runs` runs and `seconds`, as per run-hour."""
    if runs <= 0 or seconds <= 0:
        return None
    return total / runs / seconds * 3600


def by_kind(runs: Iterable[BenchRun]) -> Mapping[tuple[str, str, str], list[BenchRun]]:
    groups: dict[tuple[str, str, str], list[BenchRun]] = {}
    for run in runs:
        groups.setdefault((run.system, run.provider, run.kind), []).append(run)
    return groups
