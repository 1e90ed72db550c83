"""Helpers for the admission tests: a worker pool on a fresh task queue with short agents (in
this process, or as a subprocess that can be killed), specs, and the admission workflow's
places."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from fakes.provider import short_agents
from overnight.cli import client as api
from overnight.core.admission import PLACES_QUERY, AdmissionSettings, admission_workflow_id
from overnight.core.grants import Grants
from overnight.core.models import RunResult, RunSpec
from overnight.worker.runner import serve
from tests.waits import CAP
from workflows.pure.admission_queue import Places

REPO_ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def short_pool(
    client: Client, state_dir: Path, settings: AdmissionSettings, *, life: float = 0.2
) -> AsyncIterator[str]:
    """A worker in this process on a fresh task queue, its sandboxes
    `fakes.provider.short_agents` in `state_dir`, admitting as `settings` say; yields the task
    queue."""
    queue = f"admit-{uuid.uuid4().hex[:8]}"
    ready, stop = asyncio.Event(), asyncio.Event()
    worker = asyncio.create_task(
        serve(
            client,
            task_queue=queue,
            ready=ready,
            stop=stop,
            providers={"local": short_agents(state_dir, life=life)},
            grants=Grants(),
            admission=settings,
        )
    )
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({worker, waiter}, timeout=CAP, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if worker.done():
        worker.result()
    assert ready.is_set(), "the pool's worker did not start polling"
    try:
        yield queue
    finally:
        stop.set()
        await asyncio.wait_for(worker, timeout=60)


def short_spec(agent_dir: Path, prefix: str, **fields: Any) -> RunSpec:
    seconds = fields.pop("seconds", None)
    env = {"AGENT_SECONDS": str(seconds)} if seconds is not None else {}
    return RunSpec(
        run_id=f"{prefix}-{uuid.uuid4().hex[:8]}",
        repo="/fake/app.git",
        agent_dir=str(agent_dir),
        command="a short agent",
        env=env,
        **fields,
    )


# Starts in flight at once: the dev server's SQLite store times out under hundreds at once.
STARTS_AT_ONCE = 10


async def start_all(
    client: Client, specs: Iterable[RunSpec], queue: str
) -> list[WorkflowHandle[Any, RunResult]]:
    gate = asyncio.Semaphore(STARTS_AT_ONCE)

    async def start(spec: RunSpec) -> WorkflowHandle[Any, RunResult]:
        async with gate:
            return await api.start_run(client, spec, task_queue=queue)

    return list(await asyncio.gather(*(start(spec) for spec in specs)))


async def places(client: Client, queue: str) -> Places:
    handle = client.get_workflow_handle(admission_workflow_id(queue))
    return await handle.query(PLACES_QUERY, result_type=Places)


async def drained(client: Client, queue: str, timeout: float = 300) -> Places:
    """The pool once every place is back: a run's `release` is checked (its run closed or out
    of the pool) before its place is freed, a moment after the run ends. A holder too slow to
    answer (its worker loaded) keeps its place until it is asked again, `check_seconds` (60 s
    by default) later: the cap is generous, the wait ends as soon as the pool is empty."""

    async def empty() -> Places | None:
        pool = await places(client, queue)
        return pool if not pool.holding and not pool.waiting else None

    found: Places = await wait_for(empty, timeout, "every place given back")
    return found


async def wait_for(check: Any, timeout: float, what: str, every: float = 0.1) -> Any:
    """Call `check()` (sync or async) until it answers something true; that answer."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout
    while True:
        answer = check()
        if asyncio.iscoroutine(answer):
            answer = await answer
        if answer:
            return answer
        assert loop.time() < give_up, f"timed out waiting for {what}"
        await asyncio.sleep(every)


async def start_subprocess_worker(
    address: str, queue: str, state_dir: Path, max_runs: int
) -> asyncio.subprocess.Process:
    """A workflow worker in its own process (`tests.admission.workflow_worker`) admitting at
    most `max_runs` runs, set as a worker is, in its environment; returns once it polls."""
    env = {"OVERNIGHT_MAX_RUNS": str(max_runs), "OVERNIGHT_ADMISSION_CHECK_SECONDS": "1"}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.admission.workflow_worker",
        address,
        queue,
        str(state_dir),
        cwd=REPO_ROOT,
        env={**_inherited(), **env},
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), timeout=60)
    assert line.strip() == b"ready", f"the worker said {line!r}"
    return process


def _inherited() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("OVERNIGHT_MAX_RUNS")}
