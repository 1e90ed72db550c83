"""`python -m bench.console [--quick]`: the console's runs list, how fast and how cheap.

On a dev server of its own, with runs seeded by bench/console_world.py (the visibility entry
and row memo a real run publishes, a stand-in answering `status`), the real console app under
uvicorn in this process:

- time to first byte and to the full page of the runs list (`/`) at 100 and 1,000 runs,
  fetched over HTTP from a thread (its own socket, `Connection: close`), after the shared
  runs source has the whole list (target: 1,000 runs in under a second);
- Temporal requests per minute with 10 browsers open on the list (10 SSE streams, the
  console's one shared poller), against the same view polled naively (each browser lists the
  runs and asks `status` of each open run, every poll) at 100 runs. Both counted by the
  SDK's own request counter (`temporal_request`) of each side's client.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import socket
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import (
    LoggingConfig,
    MetricBuffer,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)
from temporalio.worker import Worker

from bench.console_world import StandInRun, seed_runs
from bench.procs import dev_server
from bench.report import RESULTS_DIR, Row, finish, percentile
from overnight.console.context import context_for
from overnight.console.server import ConsoleServer
from overnight.console.settings import READ_TOKEN_ENV, TOKEN_ENV, settings_from
from overnight.core.constants import WORKFLOW_TYPE
from overnight.core.home import HOME_ENV

TARGET_SECONDS = 1.0
BROWSERS = 10
POLL_SECONDS = 2.0  # the console's poll, and the naive browsers'
REQUEST_METRIC = "temporal_request"


@dataclass(frozen=True)
class Plan:
    levels: tuple[int, ...] = (100, 1000)
    samples: int = 10
    window: float = 60.0

    @classmethod
    def quick(cls) -> Plan:
        return cls(levels=(20, 60), samples=2, window=8.0)


@dataclass
class Found:
    ttfb: dict[int, list[float]] = field(default_factory=dict)
    full: dict[int, list[float]] = field(default_factory=dict)
    page_bytes: dict[int, int] = field(default_factory=dict)
    requests_runs: int = 0
    console_per_minute: float = 0.0
    naive_per_minute: float = 0.0
    naive_polls: int = 0
    console_polls: int = 0


async def measure(plan: Plan, state_dir: Path) -> Found:
    found = Found()
    async with dev_server(state_dir) as server:
        seed = await _connect(server.address, server.namespace, None)
        console_metrics, naive_metrics = MetricBuffer(100_000), MetricBuffer(100_000)
        console_client = await _connect(server.address, server.namespace, console_metrics)
        naive_client = await _connect(server.address, server.namespace, naive_metrics)
        queue = f"console-bench-{uuid.uuid4().hex[:6]}"
        token = secrets.token_urlsafe(24)
        environ = {TOKEN_ENV: secrets.token_urlsafe(24), READ_TOKEN_ENV: token}
        async with (
            Worker(seed, task_queue=queue, workflows=[StandInRun], max_cached_workflows=2000),
            _console(console_client, environ) as (url, context),
        ):
            runs = context.runs
            assert runs is not None
            seeded = 0
            for level in plan.levels:
                await seed_runs(seed, queue, "bench-console", seeded, level - seeded)
                seeded = level
                await _until(_holds(runs, level))
                if level == plan.levels[0]:
                    await _requests(plan, found, url, token, console_metrics, naive_client, level)
                for _ in range(2):  # warm: templates compiled, first rows drawn
                    await asyncio.to_thread(_fetch, url, "/", token)
                timings = [
                    await asyncio.to_thread(_fetch, url, "/", token) for _ in range(plan.samples)
                ]
                found.ttfb[level] = [first for first, _, _ in timings]
                found.full[level] = [whole for _, whole, _ in timings]
                found.page_bytes[level] = timings[-1][2]
    return found


async def _requests(
    plan: Plan,
    found: Found,
    url: str,
    token: str,
    console_metrics: MetricBuffer,
    naive_client: Client,
    level: int,
) -> None:
    """Requests a minute: 10 SSE streams on the shared source, then 10 naive pollers."""
    found.requests_runs = level
    streams = [asyncio.create_task(_stream(url, token)) for _ in range(BROWSERS)]
    await asyncio.sleep(POLL_SECONDS)  # the streams are open
    _drain(console_metrics)
    began = time.monotonic()
    await asyncio.sleep(plan.window)
    counted = _drain(console_metrics)
    found.console_per_minute = counted * 60 / (time.monotonic() - began)
    for task in streams:
        task.cancel()
    await asyncio.gather(*streams, return_exceptions=True)
    # The same view, polled naively by each browser: the list, and each open run's status.
    stop = asyncio.Event()
    polls: list[int] = []
    naive_requests: list[int] = []

    async def browser() -> None:
        while not stop.is_set():
            started = time.monotonic()
            made = await _naive_poll(naive_client)
            naive_requests.append(made)
            polls.append(1)
            await asyncio.sleep(max(0.0, POLL_SECONDS - (time.monotonic() - started)))

    began = time.monotonic()
    tasks = [asyncio.create_task(browser()) for _ in range(BROWSERS)]
    await asyncio.sleep(plan.window)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    found.naive_polls = len(polls)
    found.naive_per_minute = sum(naive_requests) * 60 / (time.monotonic() - began)


async def _naive_poll(client: Client) -> int:
    """One browser's look, naively: the list (a page), then `status` of each open run."""
    made = 1
    ids = [
        execution.id
        async for execution in client.list_workflows(
            f"WorkflowType = '{WORKFLOW_TYPE}' AND ExecutionStatus = 'Running'", page_size=1000
        )
    ]
    gate = asyncio.Semaphore(16)

    async def ask(run_id: str) -> None:
        async with gate:
            try:
                await client.get_workflow_handle(run_id).query(
                    "status", rpc_timeout=timedelta(seconds=10)
                )
            except Exception:  # a slow answer still cost its request
                pass

    await asyncio.gather(*(ask(run_id) for run_id in ids))
    return made + len(ids)


def _drain(metrics: MetricBuffer) -> int:
    return int(
        sum(
            update.value
            for update in metrics.retrieve_updates()
            if update.metric.name == REQUEST_METRIC
        )
    )


class _console:
    """The console app under uvicorn on a free loopback port."""

    def __init__(self, client: Client, environ: dict[str, str]) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        port = self._sock.getsockname()[1]
        settings = settings_from(environ, address="127.0.0.1", port=port)
        self.context = context_for(client, settings)
        if self.context.runs is not None:
            self.context.runs.every = POLL_SECONDS
        self.server = ConsoleServer(self.context)
        self.url = f"http://127.0.0.1:{port}"
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> tuple[str, Any]:
        self._task = asyncio.create_task(self.server.serve_on(self._sock))
        while not self.server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.05)
        return self.url, self.context

    async def __aexit__(self, *exc: object) -> None:
        self.server.stop()
        if self._task is not None:
            await asyncio.wait_for(self._task, timeout=30)
        self._sock.close()


def _fetch(url: str, path: str, token: str) -> tuple[float, float, int]:
    """(seconds to the first byte, to the last, bytes) of one GET, on a socket of its own."""
    host, port = url.removeprefix("http://").split(":")
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    with socket.create_connection((host, int(port))) as conn:
        began = time.perf_counter()
        conn.sendall(request)
        first = conn.recv(65536)
        at_first = time.perf_counter() - began
        size = len(first)
        while chunk := conn.recv(65536):
            size += len(chunk)
        at_last = time.perf_counter() - began
    if not first.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"GET {path}: {first[:80]!r}")
    return at_first, at_last, size


async def _stream(url: str, token: str) -> None:
    """A browser's open runs list: its SSE stream, read until cancelled."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        (
            f"GET /runs/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
        ).encode()
    )
    try:
        while await reader.read(65536):
            pass
    finally:
        writer.close()


def _holds(runs: Any, count: int) -> Callable[[], bool]:
    return lambda: len(runs.rows()) >= count


async def _until(check: Callable[[], bool], cap: float = 300.0) -> None:
    deadline = time.monotonic() + cap
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("the console's runs source never saw every seeded run")
        await asyncio.sleep(0.2)


async def _connect(address: str, namespace: str, metrics: MetricBuffer | None) -> Client:
    quiet = LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
    runtime = Runtime(telemetry=TelemetryConfig(logging=quiet, metrics=metrics))
    return await Client.connect(
        address, namespace=namespace, data_converter=pydantic_data_converter, runtime=runtime
    )


def console_rows(found: Found) -> list[Row]:
    rows: list[Row] = []
    for level in sorted(found.full):
        ttfb, full = found.ttfb[level], found.full[level]
        kib = found.page_bytes[level] / 1024
        rows.append(
            Row(
                metric=f"console runs list, {level:,} runs: time to first byte (p50)",
                unit="s",
                baseline=None,
                overnight=round(percentile(ttfb, 50), 4),
                note=f"max {max(ttfb):.3f} s over {len(ttfb)} loads",
                group="console",
            )
        )
        rows.append(
            Row(
                metric=f"console runs list, {level:,} runs: full page (p50)",
                unit="s",
                baseline=None,
                overnight=round(percentile(full, 50), 4),
                target="< 1 s" if level >= 1000 else "",
                at_most=TARGET_SECONDS if level >= 1000 else None,
                note=f"max {max(full):.3f} s, {kib:.0f} KiB",
                group="console",
            )
        )
    rows.append(
        Row(
            metric=(
                f"console Temporal requests per minute, {BROWSERS} browsers open "
                f"({found.requests_runs} runs)"
            ),
            unit="req/min",
            baseline=round(found.naive_per_minute, 1),
            overnight=round(found.console_per_minute, 1),
            target="<= 1/10 of naive",
            ratio_at_most=0.1,
            note=(
                f"naive: each browser lists and asks each open run's status every "
                f"{POLL_SECONDS:g} s ({found.naive_polls} polls); console: one shared poll"
            ),
            group="console",
        )
    )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.console")
    parser.add_argument("--quick", action="store_true", help="few runs, short windows")
    parser.add_argument("--results", type=Path, help="folder for latest.json (default: bench's)")
    args = parser.parse_args(argv)
    plan = Plan.quick() if args.quick else Plan()
    began, started_at = time.monotonic(), datetime.now(UTC)
    state_dir = Path(tempfile.mkdtemp(prefix="overnight-bench-console-"))
    os.environ[HOME_ENV] = str(state_dir / "home")
    found = asyncio.run(measure(plan, state_dir))
    rows = console_rows(found)
    details = {
        "console": {
            "plan": plan.__dict__,
            "ttfb": {str(k): [round(v, 4) for v in vs] for k, vs in found.ttfb.items()},
            "full": {str(k): [round(v, 4) for v in vs] for k, vs in found.full.items()},
            "page_bytes": found.page_bytes,
        }
    }
    return finish(
        args.results or (state_dir / "results" if args.quick else RESULTS_DIR),
        rows,
        details,
        command="python -m bench.console" + (" --quick" if args.quick else ""),
        started_at=started_at,
        began=began,
        metrics=["console"],
    )


if __name__ == "__main__":
    raise SystemExit(main())
