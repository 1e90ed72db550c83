"""How soon another worker takes over the watches of a worker that goes away.

Two `python worker.py` processes on a dev server of their own, `runs` local runs of the
counting agent at the default `poll_seconds` (so the default observe heartbeat timeout), each
agent alive and quiet for long after its first checkpoint. Then:

1. **graceful**: the worker holding most watches gets SIGTERM (a deploy). Its observes notice
   the shutdown and end at once (`activities.heartbeat.hand_over_on_shutdown`), and Temporal
   retries them on the other worker. Measured per run: from the signal to the moment the run's
   observe is held (started) by the other worker. Target: <= 10 s.
2. **SIGKILL** (optional, about 5 minutes): the stopped worker is started again, and the worker
   that now holds every watch, its observes just started, is SIGKILLed. Nothing tells Temporal;
   each observe is retried once its heartbeat timeout passes with no heartbeat (near the worst
   case here: no heartbeat was sent since the observes started). Target: <= 5 min.

"Held by a worker" is read from the server (`describe`: the pending observe's state and
`last_worker_identity`, which is `pid@host`), looked at every `LOOK_EVERY` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError

from activities.providers.local.engine import LocalEngine
from overnight.cli import client as api
from overnight.core.grants import WRITABLE_BIND_ROOTS_ENV
from tests.chaos.stack import ChaosServer, WorkerPool, WorkerProcess, chaos_dev_config, worker_env
from tests.e2e.counting import counting_spec

OBSERVE = "observe_agent"
LOOK_EVERY = 0.25
GRACEFUL_TARGET = 10.0
SIGKILL_TARGET = 300.0
# The agent checkpoints once, then stays alive and quiet this long (longer than the test).
QUIET_SECONDS = 1800


@dataclass
class Holding:
    """Who holds a run's observe right now, as the server says."""

    identity: str | None
    started: bool
    attempt: int
    last_heartbeat: float | None  # seconds ago, when the attempt has heartbeaten


@dataclass
class Takeover:
    """One worker gone, and how long each of its runs' watches took to be held elsewhere."""

    how: str  # "SIGTERM" or "SIGKILL"
    runs: int
    seconds: dict[str, float | None] = field(default_factory=dict)
    # SIGTERM: how long the worker took to exit after the signal.
    exit_seconds: float | None = None
    exit_code: int | None = None

    @property
    def worst(self) -> float | None:
        if not self.seconds or any(v is None for v in self.seconds.values()):
            return None
        return max(v for v in self.seconds.values() if v is not None)

    def line(self) -> str:
        taken = [v for v in self.seconds.values() if v is not None]
        if not taken:
            return f"{self.how}: none of {self.runs} watches taken over"
        text = (
            f"{self.how}: {len(taken)} of {self.runs} watches taken over, "
            f"in {min(taken):.1f}-{max(taken):.1f} s"
        )
        if self.exit_seconds is not None:
            text += f"; the worker exited in {self.exit_seconds:.1f} s (code {self.exit_code})"
        return text


@dataclass
class TakeoverReport:
    graceful: Takeover | None = None
    killed: Takeover | None = None

    def problems(self) -> list[str]:
        found = []
        for takeover, target in ((self.graceful, GRACEFUL_TARGET), (self.killed, SIGKILL_TARGET)):
            if takeover is None:
                continue
            worst = takeover.worst
            if worst is None or worst > target:
                found.append(f"{takeover.line()} (target <= {target:.0f} s)")
        return found


async def holding(client: Client, run_id: str) -> Holding | None:
    """The run's pending observe, if it has one."""
    try:
        described = await client.get_workflow_handle(run_id).describe()
    except RPCError:
        return None
    now = time.time()
    for pending in described.raw_description.pending_activities:
        if pending.activity_type.name != OBSERVE:
            continue
        beat = None
        if pending.HasField("last_heartbeat_time"):
            beat = now - pending.last_heartbeat_time.ToDatetime().timestamp()
        return Holding(
            identity=pending.last_worker_identity or None,
            started=pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
            attempt=pending.attempt,
            last_heartbeat=beat,
        )
    return None


async def holders(client: Client, run_ids: list[str]) -> dict[str, Holding | None]:
    found = await asyncio.gather(*(holding(client, run_id) for run_id in run_ids))
    return dict(zip(run_ids, found, strict=True))


def identity_of(worker: WorkerProcess) -> str:
    assert worker.process is not None
    return f"{worker.process.pid}@"


async def all_watched(client: Client, run_ids: list[str], timeout: float) -> dict[str, str]:
    """Until every run's observe is started on some worker: run id -> holder identity."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = await holders(client, run_ids)
        held = {r: h.identity for r, h in seen.items() if h and h.started and h.identity}
        if len(held) == len(run_ids):
            return held
        await asyncio.sleep(LOOK_EVERY)
    raise TimeoutError(f"not every run was watched within {timeout:.0f} s")


async def time_takeover(
    client: Client, run_ids: list[str], gone: str, since: float, timeout: float
) -> dict[str, float | None]:
    """Seconds from `since` until each run's observe is started on a worker other than the
    one whose identity starts with `gone` (None: not within `timeout`)."""
    taken: dict[str, float | None] = dict.fromkeys(run_ids)
    while time.monotonic() - since < timeout and any(v is None for v in taken.values()):
        seen = await holders(client, [r for r, v in taken.items() if v is None])
        now = time.monotonic()
        for run_id, held in seen.items():
            if held and held.started and held.identity and not held.identity.startswith(gone):
                taken[run_id] = now - since
        await asyncio.sleep(LOOK_EVERY)
    return taken


class TakeoverStack:
    """A dev server, two worker processes and `runs` quiet local runs, in `folder`."""

    def __init__(self, folder: Path, runs: int, say: object = print) -> None:
        self.folder = folder
        self.runs = runs
        self.say = say if callable(say) else print
        self.server = ChaosServer(chaos_dev_config(folder / "temporal"))
        self.home = folder / "overnight-home"
        self.task_queue = f"takeover-{uuid.uuid4().hex[:6]}"
        self.pool: WorkerPool | None = None
        self.client: Client | None = None
        self.run_ids: list[str] = []

    async def __aenter__(self) -> TakeoverStack:
        self.folder.mkdir(parents=True, exist_ok=True)
        await self.server.start()
        env = worker_env(
            dict(os.environ),
            {
                "TEMPORAL_ADDRESS": self.server.address,
                "TEMPORAL_NAMESPACE": self.server.config.namespace,
                "OVERNIGHT_HOME": str(self.home),
                # The runs' origins are bound writable (overnight/core/grants.py).
                WRITABLE_BIND_ROOTS_ENV: str(self.folder / "runs"),
            },
        )
        self.pool = WorkerPool(2, env, self.task_queue, self.folder)
        self.pool.start_all()
        await self.pool.wait_ready()
        self.client = await Client.connect(
            self.server.address,
            namespace=self.server.config.namespace,
            data_converter=pydantic_data_converter,
        )
        prefix = f"takeover-{uuid.uuid4().hex[:4]}"
        for i in range(self.runs):
            run_id = f"{prefix}-{i + 1}"
            spec, _ = counting_spec(
                run_id,
                self.folder / "runs",
                "local",
                agent_env={"AGENT_QUIET_AFTER": "1", "AGENT_QUIET_SECONDS": str(QUIET_SECONDS)},
                poll_seconds=60,  # the default: the observe's default heartbeat timeout
                stall_seconds=QUIET_SECONDS * 2,
                sandbox_timeout_seconds=QUIET_SECONDS * 2,
            )
            await api.start_run(self.client, spec, task_queue=self.task_queue)
            self.run_ids.append(run_id)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.client is not None:
            for run_id in self.run_ids:
                with contextlib.suppress(RPCError):
                    handle = self.client.get_workflow_handle(run_id)
                    if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                        await handle.terminate("takeover measurement done")
        if self.pool is not None:
            await asyncio.to_thread(self.pool.stop_all)
        engine = LocalEngine(self.home)
        for meta in await asyncio.to_thread(engine.list_sandboxes, include_stopped=False):
            await asyncio.to_thread(engine.stop, meta.id)
        self.server.stop()

    def _worker(self, identity: str) -> WorkerProcess:
        assert self.pool is not None
        for worker in self.pool.workers:
            if worker.process is not None and identity.startswith(identity_of(worker)):
                return worker
        raise LookupError(f"no worker of ours is {identity}")

    async def _busiest(self) -> tuple[WorkerProcess, list[str]]:
        assert self.client is not None
        held = await all_watched(self.client, self.run_ids, timeout=120)
        by_worker: dict[str, list[str]] = {}
        for run_id, identity in held.items():
            by_worker.setdefault(identity, []).append(run_id)
        identity, runs = max(by_worker.items(), key=lambda item: len(item[1]))
        return self._worker(identity), sorted(runs)

    async def sigterm(self) -> Takeover:
        """SIGTERM the worker holding most watches; time the hand-over and its exit."""
        assert self.client is not None and self.pool is not None
        worker, runs = await self._busiest()
        assert worker.process is not None
        gone = identity_of(worker)
        process = worker.process
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        exited = asyncio.create_task(asyncio.to_thread(process.wait, 60))
        taken = await time_takeover(self.client, runs, gone, signalled, timeout=60)
        takeover = Takeover("SIGTERM", len(runs), taken)
        with contextlib.suppress(Exception):
            takeover.exit_code = await exited
            takeover.exit_seconds = time.monotonic() - signalled
        if process.poll() is None:
            self.pool.kill(worker, counted=False)
        worker.process = None
        self.say(takeover.line())
        return takeover

    async def sigkill(self) -> Takeover:
        """Start any stopped worker again, then SIGKILL the one holding most watches."""
        assert self.client is not None and self.pool is not None
        for worker in self.pool.workers:
            if worker.process is None:
                self.pool.start(worker)
        await self.pool.wait_ready()
        worker, runs = await self._busiest()
        gone = identity_of(worker)
        killed = time.monotonic()
        self.pool.kill(worker, counted=False)
        taken = await time_takeover(self.client, runs, gone, killed, timeout=SIGKILL_TARGET + 60)
        takeover = Takeover("SIGKILL", len(runs), taken)
        self.say(takeover.line())
        return takeover


async def measure_takeover(
    folder: Path, *, runs: int = 4, sigkill: bool = True, say: object = print
) -> TakeoverReport:
    """Both take-over times (the SIGKILL one takes about 5 minutes; `sigkill=False` skips it)."""
    report = TakeoverReport()
    async with TakeoverStack(folder, runs, say) as stack:
        report.graceful = await stack.sigterm()
        if sigkill:
            report.killed = await stack.sigkill()
    return report
