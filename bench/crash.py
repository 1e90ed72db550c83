"""Metrics 1 and 2: how soon a crash is noticed, and how fast the run recovers.

Real everything: the dev server, one worker process per system (overnight's `serve`, the
baseline's worker), the local provider and the sample agent, which crashes after step 2 at a
random moment (`AGENT_STEP_DELAY` drawn per run). All samples of both systems run at once.

Per sample (all Unix seconds, one machine clock):
- exited: the local launcher's record of the agent's exit (`exit.json`, written as soon as
  its `wait()` returns);
- noticed: when the workflow recorded the crash (`RestartRecord.at`, from the `status` query);
- create started: when the new sandbox's `create_sandbox` activity started (history);
- running again: the new agent's start, recorded by its launcher (`process.json`).

crash-to-noticed = noticed - exited; recovery = running again - noticed; the provider's own
part of it (create, clone, upload, checkpoint, start) = running again - create started; the
supervisor's overhead = recovery - provider = create started - noticed. The provider's create
time is also measured directly, by calling the `create_sandbox` activity outside Temporal.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from activities.models import CreateSandboxInput
from activities.providers.local.engine import LocalEngine
from activities.providers.local.procs import ProcessRecord
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import ProviderError
from activities.sandbox.activities import SandboxActivities
from bench.baseline import BASELINE_WORKFLOW, NaiveStatus
from bench.procs import worker_process
from bench.report import Row, percentile, summarize
from bench.timeline import activities
from overnight.core.constants import LABEL_RUN, WORKFLOW_TYPE
from overnight.core.isolation import HostBind
from overnight.core.models import RunSpec, RunStatus
from overnight.demo.outside_world import host_ports_for, ledger_url
from overnight.demo.sample_demo import AGENT_DIR, DemoFiles, make_origin

AGENT_COMMAND = "python3 /workspace/agent/main.py --resume /workspace/checkpoint.json"
DIE_AFTER_STEP = 2
FIRST_CRASH_SECONDS = 5.0
# A query or history read that gets no answer (no worker took it) must not hold the bench.
RPC_TIMEOUT = timedelta(seconds=15)
SYSTEMS = (WORKFLOW_TYPE, BASELINE_WORKFLOW)
# A local crash is seen by the kernel's word (pidfd, inotify): noticed within this, median.
NOTICE_TARGET_SECONDS = 0.05


@dataclass
class CrashSample:
    system: str
    run_id: str
    step_delay: float
    exited_at: float | None = None
    noticed_at: float | None = None
    create_started_at: float | None = None
    running_again_at: float | None = None

    @property
    def complete(self) -> bool:
        return None not in (
            self.exited_at,
            self.noticed_at,
            self.create_started_at,
            self.running_again_at,
        )

    def span(self, start: float | None, end: float | None) -> float:
        assert start is not None and end is not None
        return end - start


def crash_spec(run_id: str, files: DemoFiles, step_delay: float, poll_seconds: float) -> RunSpec:
    ledger = ledger_url(files.ledger)
    return RunSpec(
        run_id=run_id,
        repo=str(files.origin),
        binds=[HostBind(path=str(files.origin), writable=True)],
        agent_dir=str(AGENT_DIR),
        command=AGENT_COMMAND,
        env={
            "OVERNIGHT_LEDGER_URL": ledger,
            "AGENT_DIE_AFTER": str(DIE_AFTER_STEP),
            "AGENT_STEP_DELAY": f"{step_delay:.3f}",
        },
        host_ports=host_ports_for(ledger),
        poll_seconds=poll_seconds,
        sandbox_timeout_seconds=600,
    )


async def measure_crash(
    client: Client,
    address: str,
    state_dir: Path,
    *,
    samples: int,
    poll_seconds: float,
    direct_samples: int,
    seed: int = 1,
) -> tuple[list[Row], dict[str, Any]]:
    files = make_origin(state_dir / "crash-origin")
    rng = random.Random(seed)
    # The crash comes after DIE_AFTER_STEP delays: spread it evenly over one poll interval.
    low = FIRST_CRASH_SECONDS / DIE_AFTER_STEP
    runs = [
        CrashSample(system, f"crash-{system.lower()}-{i}-{uuid.uuid4().hex[:6]}", delay)
        for system in SYSTEMS
        for i in range(samples)
        for delay in [rng.uniform(low, low + poll_seconds / DIE_AFTER_STEP)]
    ]
    queues = {system: f"bench-crash-{system.lower()}-{uuid.uuid4().hex[:6]}" for system in SYSTEMS}
    started = time.monotonic()
    async with (
        _worker("overnight", address, client.namespace, queues[WORKFLOW_TYPE], state_dir),
        _worker("baseline", address, client.namespace, queues[BASELINE_WORKFLOW], state_dir),
    ):
        try:
            await asyncio.gather(
                *(
                    client.start_workflow(
                        run.system,
                        crash_spec(run.run_id, files, run.step_delay, poll_seconds),
                        id=run.run_id,
                        task_queue=queues[run.system],
                    )
                    for run in runs
                )
            )
            give_up = FIRST_CRASH_SECONDS + 2 * poll_seconds + 60
            await _wait_running_again(runs, deadline=time.monotonic() + give_up)
            for run in runs:
                await _read_times(client, run)
        finally:
            await _clean_up(client, runs)
    direct = await _direct_creates(files, direct_samples, poll_seconds)
    wall = time.monotonic() - started
    return _rows(runs, direct), _details(runs, direct, poll_seconds, wall)


def _worker(system: str, address: str, namespace: str, queue: str, state_dir: Path) -> Any:
    args = ["--system", system, "--provider", "local", "--address", address]
    args += ["--namespace", namespace, "--task-queue", queue, "--max-runs", "100"]
    return worker_process(args, state_dir / f"crash-worker-{system}.log")


def _process(engine: LocalEngine, run_id: str, attempt: int) -> ProcessRecord | None:
    try:
        return engine.process(f"{run_id}-{attempt}", f"{run_id}-{attempt}-0")
    except ProviderError:
        return None


async def _wait_running_again(runs: list[CrashSample], deadline: float) -> None:
    engine = LocalEngine()
    waiting = list(runs)
    while waiting and time.monotonic() < deadline:
        for run in list(waiting):
            record = _process(engine, run.run_id, 2)
            if record is not None and record.started_at is not None:
                run.running_again_at = record.started_at
                waiting.remove(run)
        await asyncio.sleep(0.25)


async def _read_times(client: Client, run: CrashSample) -> None:
    first = _process(LocalEngine(), run.run_id, 1)
    run.exited_at = first.ended_at if first is not None else None
    handle = client.get_workflow_handle(run.run_id)
    try:
        if run.system == WORKFLOW_TYPE:
            status: RunStatus | NaiveStatus = await handle.query(
                "status", result_type=RunStatus, rpc_timeout=RPC_TIMEOUT
            )
        else:
            status = await handle.query("status", result_type=NaiveStatus, rpc_timeout=RPC_TIMEOUT)
        history = await handle.fetch_history(rpc_timeout=RPC_TIMEOUT)
    except RPCError:
        return
    if status.restarts:
        run.noticed_at = status.restarts[0].at.timestamp()
    creates = [a for a in activities(list(history.events)) if a.name == "create_sandbox"]
    if len(creates) >= 2:
        run.create_started_at = creates[1].started_at


async def _clean_up(client: Client, runs: list[CrashSample]) -> None:
    """Cancel overnight's runs (they stop their sandboxes), terminate the baseline's, then stop
    whatever sandbox of these runs still runs."""
    for run in runs:
        handle = client.get_workflow_handle(run.run_id)
        try:
            if run.system == WORKFLOW_TYPE:
                await handle.signal("cancel", "benchmark over")
            else:
                await handle.terminate("benchmark over")
        except RPCError:
            pass
    deadline = time.monotonic() + 60
    for run in runs:
        handle = client.get_workflow_handle(run.run_id)
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
    provider = LocalProvider()
    ours = {run.run_id for run in runs}
    for box in await provider.list({}, include_stopped=False):
        if box.labels.get(LABEL_RUN) in ours:
            await provider.stop(box.sandbox_id)


async def _direct_creates(files: DemoFiles, count: int, poll_seconds: float) -> list[float]:
    """The provider's own create + clone + start time: `create_sandbox` called directly."""
    provider = LocalProvider()
    acts = SandboxActivities(None, providers={"local": provider})
    seconds = []
    for i in range(count):
        run_id = f"direct-{i}-{uuid.uuid4().hex[:6]}"
        spec = crash_spec(run_id, files, 60, poll_seconds)
        checkpoint = '{"step": 1, "done": ["read the code"], "next": "write the migration"}'
        begun = time.time()
        started = await acts.create_sandbox(
            CreateSandboxInput(spec=spec, attempt=2, checkpoint=checkpoint)
        )
        record = provider.engine.process(started.sandbox_id, started.process_id)
        if record is not None and record.started_at is not None:
            seconds.append(record.started_at - begun)
        await provider.stop(started.sandbox_id)
    return seconds


def _spans(runs: list[CrashSample], system: str) -> dict[str, list[float]]:
    done = [run for run in runs if run.system == system and run.complete]
    return {
        "crash_to_noticed": [r.span(r.exited_at, r.noticed_at) for r in done],
        "recovery": [r.span(r.noticed_at, r.running_again_at) for r in done],
        "provider": [r.span(r.create_started_at, r.running_again_at) for r in done],
        "overhead": [r.span(r.noticed_at, r.create_started_at) for r in done],
    }


def _median(values: list[float]) -> float | None:
    return round(percentile(values, 50), 3) if values else None


def _rows(runs: list[CrashSample], direct: list[float]) -> list[Row]:
    ours, theirs = _spans(runs, WORKFLOW_TYPE), _spans(runs, BASELINE_WORKFLOW)

    def p95(values: list[float]) -> float | None:
        return round(percentile(values, 95), 3) if values else None

    n_ours, n_theirs = len(ours["recovery"]), len(theirs["recovery"])
    direct_median = _median(direct)
    recovery_ours = _median(ours["recovery"])
    return [
        Row(
            "crash-to-noticed, median",
            "s",
            _median(theirs["crash_to_noticed"]),
            _median(ours["crash_to_noticed"]),
            f"<= {NOTICE_TARGET_SECONDS:g} s",
            at_most=NOTICE_TARGET_SECONDS,
            note=(
                f"{n_ours} overnight / {n_theirs} baseline samples, poll_seconds as set; "
                "from the launcher's exit record to the workflow's restart record "
                "(overnight: the worker's inotify and the agent's pidfd)"
            ),
        ),
        Row(
            "crash-to-noticed, p95",
            "s",
            p95(theirs["crash_to_noticed"]),
            p95(ours["crash_to_noticed"]),
        ),
        Row(
            "recovery: noticed -> agent running, median",
            "s",
            _median(theirs["recovery"]),
            recovery_ours,
        ),
        Row(
            "recovery overhead beyond provider create+clone, median",
            "s",
            _median(theirs["overhead"]),
            _median(ours["overhead"]),
            "<= 0.5 s",
            at_most=0.5,
            note=(
                f"provider create+clone+start in the same runs: median "
                f"{_median(ours['provider'])} s (overnight), {_median(theirs['provider'])} s "
                f"(baseline); called directly: median {direct_median} s over {len(direct)}; "
                "recovery minus direct: "
                + (
                    f"{recovery_ours - direct_median:.3f} s"
                    if recovery_ours is not None and direct_median is not None
                    else "-"
                )
            ),
        ),
    ]


def _details(
    runs: list[CrashSample], direct: list[float], poll_seconds: float, wall: float
) -> dict[str, Any]:
    return {
        "poll_seconds": poll_seconds,
        "wall_seconds": round(wall, 1),
        "incomplete_samples": [run.run_id for run in runs if not run.complete],
        "overnight": {k: summarize(v) for k, v in _spans(runs, WORKFLOW_TYPE).items()},
        "baseline": {k: summarize(v) for k, v in _spans(runs, BASELINE_WORKFLOW).items()},
        "direct_provider_create": summarize(direct),
        "samples": [asdict(run) for run in runs],
    }
