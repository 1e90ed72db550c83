"""What payload encryption costs: `python -m bench.codec [--quick]`.

The codec (overnight.core.codec, `OVERNIGHT_CODEC_KEYS`) changes the bytes of every payload, never
how many events, activities or timers a run makes, so it must cost no billable action and no
time to notice a crash. Measured here, codec off (the baseline column) against codec on, in the
same run:

- billable actions and history bytes of one healthy supervised run (bench/history.py's, on
  the time-skipping server), once with plain payloads and once encrypted;
- crash-to-noticed on the real stack: a dev server, two worker processes (`bench.worker_main`,
  one with `OVERNIGHT_CODEC_KEYS` set), the sample agent crashing at a random moment in each
  run, all runs of both at once (bench/crash.py's agent and spec); noticed is the workflow's
  own record of the restart, exited the local launcher's record of the agent's exit;
- the codec's own time on the largest checkpoint a run accepts (256 KiB): encode + decode.

Rows (group `codec`) go into bench/results/latest.json beside the suite's.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.service import RPCError

from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import ProviderError
from bench.actions import HistoryCost
from bench.crash import DIE_AFTER_STEP, FIRST_CRASH_SECONDS, crash_spec
from bench.history import overnight_history_cost
from bench.procs import dev_server, worker_process
from bench.report import RESULTS_DIR, Row, finish, percentile
from overnight.core.codec import CODEC_KEYS_ENV, data_converter, parse_keys
from overnight.core.constants import LABEL_RUN, WORKFLOW_TYPE
from overnight.core.grants import WRITABLE_BIND_ROOTS_ENV
from overnight.core.home import HOME_ENV
from overnight.core.models import RunStatus
from overnight.demo.sample_demo import make_origin

MODES = ("off", "on")
# Crash-to-noticed with the codec on may be at most this much above off (sampling noise).
NOTICED_TOLERANCE_SECONDS = 0.1
CHECKPOINT_BYTES = 256 * 1024
CODEC_REPEATS = 50


@dataclass(frozen=True)
class CodecPlan:
    samples: int
    poll_seconds: float
    hours: float
    # Healthy runs per mode: a run's count of search attribute upserts varies by one with the
    # time-skipping server's timing, codec or not, so each mode is measured more than once.
    repeats: int

    @staticmethod
    def full() -> CodecPlan:
        return CodecPlan(samples=10, poll_seconds=60, hours=6, repeats=3)

    @staticmethod
    def quick() -> CodecPlan:
        return CodecPlan(samples=1, poll_seconds=2, hours=1, repeats=2)


@dataclass
class Sample:
    mode: str
    run_id: str
    step_delay: float
    exited_at: float | None = None
    noticed_at: float | None = None

    @property
    def seconds(self) -> float | None:
        if self.exited_at is None or self.noticed_at is None:
            return None
        return self.noticed_at - self.exited_at


@dataclass
class Measured:
    actions: dict[str, list[HistoryCost]] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    codec_seconds: dict[str, float] = field(default_factory=dict)
    hours: float = 0.0

    def noticed(self, mode: str) -> list[float]:
        return [s.seconds for s in self.samples if s.mode == mode and s.seconds is not None]


def new_keys() -> str:
    return f"bench:{base64.b64encode(os.urandom(32)).decode()}"


def converters(keys: str) -> dict[str, DataConverter]:
    return {"off": pydantic_data_converter, "on": data_converter(parse_keys(keys))}


async def measure_actions(hours: float, keys: str, repeats: int) -> dict[str, list[HistoryCost]]:
    """`repeats` healthy runs per mode, interleaved so the machine's load falls on both."""
    found: dict[str, list[HistoryCost]] = {mode: [] for mode in MODES}
    for _ in range(repeats):
        for mode, converter in converters(keys).items():
            found[mode].append(await overnight_history_cost(hours, converter))
    return found


async def measure_codec_time(keys: str) -> dict[str, float]:
    """Seconds per encode + decode of a 256 KiB checkpoint text, plain and encrypted."""
    text = json.dumps({"notes": ["x" * 100] * (CHECKPOINT_BYTES // 110)})[:CHECKPOINT_BYTES]
    timed = {}
    for mode, converter in converters(keys).items():
        began = time.perf_counter()
        for _ in range(CODEC_REPEATS):
            await converter.decode(await converter.encode([text]), [str])
        timed[mode] = (time.perf_counter() - began) / CODEC_REPEATS
    return timed


async def measure_crash_to_noticed(
    address: str, namespace: str, state_dir: Path, keys: str, plan: CodecPlan
) -> list[Sample]:
    files = make_origin(state_dir / "codec-origin")
    rng = random.Random(1)
    low = FIRST_CRASH_SECONDS / DIE_AFTER_STEP
    samples = [
        Sample(mode, f"codec-{mode}-{i}-{uuid.uuid4().hex[:6]}", delay)
        for i in range(plan.samples)
        for mode in MODES
        for delay in [rng.uniform(low, low + plan.poll_seconds / DIE_AFTER_STEP)]
    ]
    queues = {mode: f"bench-codec-{mode}-{uuid.uuid4().hex[:6]}" for mode in MODES}
    clients = {
        mode: await Client.connect(address, namespace=namespace, data_converter=converter)
        for mode, converter in converters(keys).items()
    }

    def worker(mode: str) -> Any:
        args = ["--system", "overnight", "--provider", "local", "--address", address]
        args += ["--namespace", namespace, "--task-queue", queues[mode], "--max-runs", "100"]
        env = {CODEC_KEYS_ENV: keys if mode == "on" else None}
        return worker_process(args, state_dir / f"codec-worker-{mode}.log", env=env)

    async with worker("off"), worker("on"):
        try:
            await asyncio.gather(
                *(
                    clients[s.mode].start_workflow(
                        WORKFLOW_TYPE,
                        crash_spec(s.run_id, files, s.step_delay, plan.poll_seconds),
                        id=s.run_id,
                        task_queue=queues[s.mode],
                    )
                    for s in samples
                )
            )
            give_up = time.monotonic() + FIRST_CRASH_SECONDS + 2 * plan.poll_seconds + 60
            await _wait_noticed(clients, samples, give_up)
        finally:
            await _clean_up(clients, samples)
    return samples


async def _wait_noticed(clients: dict[str, Client], samples: list[Sample], until: float) -> None:
    engine = LocalEngine()
    waiting = list(samples)
    while waiting and time.monotonic() < until:
        for sample in list(waiting):
            handle = clients[sample.mode].get_workflow_handle(sample.run_id)
            try:
                status = await handle.query("status", result_type=RunStatus)
            except RPCError:
                continue
            if status.restarts:
                sample.noticed_at = status.restarts[0].at.timestamp()
                sample.exited_at = _exited_at(engine, sample.run_id)
                waiting.remove(sample)
        await asyncio.sleep(0.5)


def _exited_at(engine: LocalEngine, run_id: str) -> float | None:
    try:
        record = engine.process(f"{run_id}-1", f"{run_id}-1-0")
    except ProviderError:
        return None
    return record.ended_at if record is not None else None


async def _clean_up(clients: dict[str, Client], samples: list[Sample]) -> None:
    try:
        await _end_runs(clients, samples)
    finally:
        # Whatever the runs did, none of their sandboxes outlives the bench.
        provider = LocalProvider()
        ours = {sample.run_id for sample in samples}
        for box in await provider.list({}, include_stopped=False):
            if box.labels.get(LABEL_RUN) in ours:
                await provider.stop(box.sandbox_id)


async def _end_runs(clients: dict[str, Client], samples: list[Sample]) -> None:
    for sample in samples:
        handle = clients[sample.mode].get_workflow_handle(sample.run_id)
        try:
            await handle.signal("cancel", "benchmark over")
        except RPCError:
            pass
    deadline = time.monotonic() + 60
    for sample in samples:
        handle = clients[sample.mode].get_workflow_handle(sample.run_id)
        while time.monotonic() < deadline:
            try:
                if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                    break
            except RPCError:
                break
            await asyncio.sleep(0.5)
        try:
            await handle.terminate("benchmark over")
        except RPCError:
            pass


def _stat(values: list[float], q: float) -> float | None:
    return round(percentile(values, q), 3) if values else None


def codec_rows(found: Measured) -> list[Row]:
    hours = found.hours

    def per_hour(mode: str, of: Callable[[HistoryCost], float]) -> list[float]:
        return [round(of(cost) / hours, 1) for cost in found.actions[mode]]

    actions = {mode: per_hour(mode, lambda c: c.total_actions) for mode in MODES}
    kib = {mode: per_hour(mode, lambda c: c.history_bytes / 1024) for mode in MODES}
    noticed_off, noticed_on = found.noticed("off"), found.noticed("on")
    median_off = _stat(noticed_off, 50)
    mean_off = round(statistics.mean(actions["off"]), 2)
    rows = [
        Row(
            "billable actions / supervised hour: codec on vs off",
            "actions",
            mean_off,
            round(statistics.mean(actions["on"]), 2),
            "adds <= 1 action per run",
            # A run's search attribute upserts vary by one with the time-skipping server's
            # timing, codec or not: the bench's own noise, not the codec's cost.
            at_most=round(mean_off + 1 / hours, 2),
            note=(
                f"mean of {len(actions['on'])} healthy {hours:g} h runs each "
                f"(bench/history.py's, time-skipping), interleaved: off {actions['off']}, "
                f"on {actions['on']}"
            ),
        ),
        Row(
            "history bytes / supervised hour: codec on vs off",
            "KiB",
            round(statistics.mean(kib["off"]), 1),
            round(statistics.mean(kib["on"]), 1),
            note="each payload gains a nonce, a tag and its key id",
        ),
        Row(
            "crash-to-noticed, median: codec on vs off",
            "s",
            median_off,
            _stat(noticed_on, 50),
            f"adds <= {NOTICED_TOLERANCE_SECONDS} s",
            at_most=None if median_off is None else median_off + NOTICED_TOLERANCE_SECONDS,
            note=f"{len(noticed_on)} on / {len(noticed_off)} off samples at once, two workers",
        ),
        Row(
            "crash-to-noticed, p95: codec on vs off",
            "s",
            _stat(noticed_off, 95),
            _stat(noticed_on, 95),
        ),
        Row(
            "codec: encode + decode of a 256 KiB checkpoint, on vs off",
            "ms",
            round(found.codec_seconds["off"] * 1000, 3),
            round(found.codec_seconds["on"] * 1000, 3),
            note=f"mean of {CODEC_REPEATS}; off: the pydantic converter alone",
        ),
    ]
    for row in rows:
        row.group = "codec"
    return rows


async def measure(plan: CodecPlan, state_dir: Path, address: str | None = None) -> Measured:
    keys = new_keys()
    found = Measured(hours=plan.hours)
    found.codec_seconds = await measure_codec_time(keys)
    found.actions = await measure_actions(plan.hours, keys, plan.repeats)
    # The bench's workers bind the origin under `state_dir` writable: a grant of theirs, for
    # this measure only.
    before = os.environ.get(WRITABLE_BIND_ROOTS_ENV)
    os.environ[WRITABLE_BIND_ROOTS_ENV] = str(state_dir.resolve())
    try:
        if address is not None:
            found.samples = await measure_crash_to_noticed(
                address, "default", state_dir, keys, plan
            )
            return found
        async with dev_server(state_dir) as server:
            found.samples = await measure_crash_to_noticed(
                server.address, server.namespace, state_dir, keys, plan
            )
        return found
    finally:
        if before is None:
            os.environ.pop(WRITABLE_BIND_ROOTS_ENV, None)
        else:
            os.environ[WRITABLE_BIND_ROOTS_ENV] = before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.codec")
    parser.add_argument("--quick", action="store_true", help="one sample each, short polls")
    parser.add_argument("--results", type=Path, help="folder for latest.json (default: bench's)")
    args = parser.parse_args(argv)
    plan = CodecPlan.quick() if args.quick else CodecPlan.full()
    began, started_at = time.monotonic(), datetime.now(UTC)
    state_dir = Path(tempfile.mkdtemp(prefix="overnight-bench-codec-"))
    os.environ[HOME_ENV] = str(state_dir / "home")
    found = asyncio.run(measure(plan, state_dir))
    rows = codec_rows(found)
    details: dict[str, Any] = {
        "codec": {
            "plan": plan.__dict__,
            "noticed": {mode: [round(v, 3) for v in found.noticed(mode)] for mode in MODES},
            "incomplete_samples": [s.run_id for s in found.samples if s.seconds is None],
        }
    }
    return finish(
        args.results or (state_dir / "results" if args.quick else RESULTS_DIR),
        rows,
        details,
        command="python -m bench.codec" + (" --quick" if args.quick else ""),
        started_at=started_at,
        began=began,
        metrics=["codec"],
    )


if __name__ == "__main__":
    raise SystemExit(main())
