"""The chaos harness: many real runs of the sample agent on the real stack, shaken hard.

    report = await run_chaos(REDUCED, folder)
    print(render_table(report))

Stack: a dev server from temporal-dev.yaml on a SQLite file in `folder`, two `worker.py`
processes, the local provider, and the runtime provider over the loopback fake Runtime API
(in this process, on its own thread; strict: it refuses what the real API refuses). Faults:
every agent carries some (see `plan`), one worker is SIGKILLed and restarted every
`worker_kill_every` seconds, the fake answers with a storm of 503s, 529s and slow answers for
`storm_seconds`, and the dev server may be SIGKILLed and started again on the same database.

Lease ends are time passing, made to happen here (`LocalEngine.set_lease_end`, the fake's
`end_lease_in`): runs carrying `lease_end` meet them after chosen checkpoints, with workers
alive; and in the dead man's window every worker is SIGKILLed at once and every running
sandbox's lease ends, so the sandboxes must pause with nobody watching and the runs go on
when the workers are back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.service import RPCError

from activities.providers.local.engine import LocalEngine
from fakes.runtime import FakeRuntime
from overnight.cli import client as api
from overnight.core.constants import LABEL_ATTEMPT, LABEL_RUN
from overnight.core.grants import WRITABLE_BIND_ROOTS_ENV
from overnight.core.models import RunResult, RunStatus
from overnight.demo.sample_demo import ledger_entries, make_origin
from tests.chaos.plan import STEPS, ChaosSize, RunPlan, plan_runs, run_spec
from tests.chaos.stack import ChaosServer, WorkerPool, chaos_dev_config, worker_env
from tests.chaos.storm import Storm, end_storm, start_storm
from tests.chaos.verdict import ChaosReport, RunFacts, checkpoint_step
from tests.e2e.counting import agent_frozen
from tests.e2e.helpers import agent_pids

WORKERS = 2
RESTART_WORKER_AFTER = 1.0
LOOK_EVERY = 2.0
# Lease ends: how often a leased run's checkpoint is looked at, how soon after it the lease
# ends, and when the sandboxes of the dead man's window are looked at (all paused by then).
LEASE_LOOK_EVERY = 0.25
LEASE_ENDS_IN = 0.5
DEAD_MAN_LOOK_AFTER = 3.0
DEAD_MAN_PATIENCE = 10.0
LEASE_HANDLED_WITHIN = 15.0
# A lease end made is met when its sandbox is seen paused within this (looked at this often).
LEASE_MET_WITHIN = 3.0
LEASE_MET_LOOK_EVERY = 0.05
RPC_TIMEOUT = timedelta(seconds=10)
CLOSED = {
    WorkflowExecutionStatus.COMPLETED,
    WorkflowExecutionStatus.FAILED,
    WorkflowExecutionStatus.CANCELED,
    WorkflowExecutionStatus.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT,
}

Say = Callable[[str], None]


class Chaos:
    """One chaos run in `folder`; `run()` returns the report and leaves nothing running."""

    def __init__(self, size: ChaosSize, folder: Path, say: Say = print) -> None:
        self.size = size
        self.folder = folder
        self.say = say
        self.local_home = folder / "overnight-home"
        self.runtime_home = folder / "runtime-home"
        self.server = ChaosServer(chaos_dev_config(folder / "temporal"))
        self.fake = FakeRuntime.local(self.runtime_home, api_key=f"chaos-{uuid.uuid4().hex}")
        self.task_queue = f"chaos-{uuid.uuid4().hex[:6]}"
        self.pool: WorkerPool | None = None
        self.client: Client | None = None
        self.plans: list[RunPlan] = []
        self.ledgers: dict[str, Path] = {}
        self.origins: dict[str, Path] = {}
        self.results: dict[str, RunResult | str] = {}
        self.storm: Storm | None = None
        # Held while workers are killed on purpose, so two shakers never overlap.
        self.workers_lock = asyncio.Lock()
        self.dead_man_windows = 0
        # (start, end) wall times with no worker alive: no stall can be noticed in them.
        self.no_worker_spans: list[tuple[float, float]] = []
        self.dead_man_active = False
        # Lease ends made with workers alive that were met (the sandbox paused), and those an
        # extension the run made just then moved out of the way (never met).
        self.lease_ends: dict[str, int] = {}
        self.lease_ends_preempted: dict[str, int] = {}
        self._lease_watchers: set[asyncio.Task[None]] = set()
        self._making_lease_ends = 0
        # Sandboxes whose lease the harness ended with workers alive, until woken again.
        self.lease_ended: list[tuple[RunPlan, str]] = []
        self.lease_ends_unwatched: dict[str, int] = {}
        self.paused_unwatched: dict[str, int] = {}
        self.frozen_unwatched: dict[str, int] = {}
        self.started_at = 0.0
        self._log: list[str] = []

    def note(self, text: str) -> None:
        line = f"[{time.monotonic() - self.started_at:6.1f}s] {text}" if self.started_at else text
        self._log.append(line)
        self.say(line)

    async def run(self) -> ChaosReport:
        began = time.monotonic()
        try:
            await self._bring_up()
            await self._start_runs()
            await self._shake_until_done()
            report = await self._collect(time.monotonic() - began)
        finally:
            await self._tear_down()
        (self.folder / "chaos.log").write_text("\n".join(self._log) + "\n")
        return report

    # --- the stack ---------------------------------------------------------------------------

    async def _bring_up(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        await self.server.start()
        await self.fake.__aenter__()
        env = worker_env(
            dict(os.environ),
            {
                "TEMPORAL_ADDRESS": self.server.address,
                "TEMPORAL_NAMESPACE": self.server.config.namespace,
                "OVERNIGHT_HOME": str(self.local_home),
                # The runs' origins are bound writable (overnight/core/grants.py).
                WRITABLE_BIND_ROOTS_ENV: str(self.folder / "runs"),
                **self.fake.environ(self.folder / "config"),
            },
        )
        self.pool = WorkerPool(WORKERS, env, self.task_queue, self.folder)
        self.pool.start_all()
        await self.pool.wait_ready()
        self.client = await self._connect()
        self.note(
            f"stack up: server {self.server.address}, {WORKERS} workers, fake {self.fake.url}"
        )

    async def _connect(self) -> Client:
        # The client retries through the server restart; its warnings about it are expected.
        quiet = TelemetryFilter(core_level="ERROR", other_level="ERROR")
        return await Client.connect(
            self.server.address,
            namespace=self.server.config.namespace,
            data_converter=pydantic_data_converter,
            runtime=Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter=quiet))),
        )

    async def _tear_down(self) -> None:
        """Whatever happened: no workflow open, no sandbox running, no process left."""
        if self.client is not None:
            for plan in self.plans:
                with contextlib.suppress(RPCError):
                    handle = self.client.get_workflow_handle(plan.run_id)
                    if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                        await handle.terminate("chaos harness cleanup")
        if self.pool is not None:
            await asyncio.to_thread(self.pool.stop_all)
        for home in (self.local_home, self.runtime_home):
            engine = LocalEngine(home)
            for meta in await asyncio.to_thread(engine.list_sandboxes, include_stopped=False):
                await asyncio.to_thread(engine.stop, meta.id)
        await self.fake.__aexit__(None, None, None)
        self.server.stop()

    # --- runs --------------------------------------------------------------------------------

    async def _start_runs(self) -> None:
        assert self.client is not None
        self.plans = plan_runs(self.size, f"chaos-{uuid.uuid4().hex[:4]}")
        specs = []
        for plan in self.plans:
            files = await asyncio.to_thread(make_origin, self.folder / "runs" / plan.run_id)
            self.ledgers[plan.run_id] = files.ledger
            self.origins[plan.run_id] = files.origin
            specs.append(run_spec(self.size, plan, files.origin, files.ledger))
        self.started_at = time.monotonic()
        for spec in specs:
            await api.start_run(self.client, spec, task_queue=self.task_queue)
        self.note(f"started {len(specs)} runs on task queue {self.task_queue}")

    async def _shake_until_done(self) -> None:
        shakers = [
            asyncio.create_task(self._kill_workers()),
            asyncio.create_task(self._storm()),
            asyncio.create_task(self._restart_server()),
            asyncio.create_task(self._revive_workers()),
            asyncio.create_task(self._end_leases()),
            asyncio.create_task(self._dead_man()),
        ]
        try:
            await self._wait_for_results()
        finally:
            for task in [*shakers, *self._lease_watchers]:
                task.cancel()
            await asyncio.gather(*shakers, *self._lease_watchers, return_exceptions=True)
            if self.storm is not None:
                end_storm(self.fake)
            assert self.pool is not None
            for worker in self.pool.workers:  # a kill may have been cut short by the end
                if worker.process is None:
                    self.pool.start(worker)

    async def _wait_for_results(self) -> None:
        deadline = self.started_at + self.size.deadline_seconds
        pending = {plan.run_id for plan in self.plans}
        while pending and time.monotonic() < deadline:
            for run_id in sorted(pending):
                outcome = await self._outcome(run_id)
                if outcome is not None:
                    self.results[run_id] = outcome
                    pending.discard(run_id)
                    what = outcome if isinstance(outcome, str) else outcome.outcome
                    self.note(f"{run_id} ended: {what} ({len(pending)} to go)")
            await asyncio.sleep(LOOK_EVERY)
        for run_id in pending:
            self.results[run_id] = f"still open after {self.size.deadline_seconds:.0f}s"

    async def _outcome(self, run_id: str) -> RunResult | str | None:
        """The run's result once it has closed; None while open or the server is away."""
        assert self.client is not None
        handle = self.client.get_workflow_handle(run_id, result_type=RunResult)
        try:
            status = (await handle.describe(rpc_timeout=RPC_TIMEOUT)).status
            if status not in CLOSED:
                return None
            if status != WorkflowExecutionStatus.COMPLETED:
                return f"workflow {status.name.lower() if status else 'closed'}"
            result: RunResult = await handle.result()
            return result
        except RPCError:
            return None

    # --- the shakers -------------------------------------------------------------------------

    async def _kill_workers(self) -> None:
        assert self.pool is not None
        kills = 0
        while self.size.max_worker_kills is None or kills < self.size.max_worker_kills:
            await asyncio.sleep(self.size.worker_kill_every)
            async with self.workers_lock:
                worker = self.pool.workers[kills % len(self.pool.workers)]
                self.pool.kill(worker)
                kills += 1
                self.note(f"SIGKILL {worker.name} (kill {kills})")
                await asyncio.sleep(RESTART_WORKER_AFTER)
                self.pool.start(worker)

    async def _revive_workers(self) -> None:
        assert self.pool is not None
        while True:
            await asyncio.sleep(1)
            if self.pool.revive_dead():
                self.note("a worker exited on its own: started again")

    async def _storm(self) -> None:
        await asyncio.sleep(self.size.storm_at)
        self.storm = start_storm(self.fake, self.size.seed)
        self.note(f"Runtime API storm for {self.size.storm_seconds:.0f}s")
        try:
            await asyncio.sleep(self.size.storm_seconds)
        finally:
            end_storm(self.fake)
            self.note(f"storm over: {self.storm.counts}")

    async def _end_leases(self) -> None:
        """Runs carrying `lease_end`: once the agent has checkpointed each chosen step (and
        works on the next), its sandbox's lease ends, with workers alive."""
        due = {plan.run_id: list(plan.lease_end_after) for plan in self.plans}
        while any(due.values()):
            await asyncio.sleep(LEASE_LOOK_EVERY)
            if self.dead_man_active:
                continue
            for plan in self.plans:
                steps = due[plan.run_id]
                if not steps or plan.run_id in self.results:
                    continue
                found = await asyncio.to_thread(self._running_sandbox, plan)
                if found is None or self.dead_man_active:
                    continue
                sandbox_id, step = found
                if step is None or step < steps[0]:
                    continue
                if step >= STEPS:
                    steps.clear()  # the agent is done: nothing left to interrupt
                    continue
                steps.pop(0)
                self.lease_ended.append((plan, sandbox_id))
                self._making_lease_ends += 1
                try:
                    await asyncio.to_thread(self._end_lease, plan, sandbox_id)
                finally:
                    self._making_lease_ends -= 1
                watcher = asyncio.create_task(self._lease_end_met(plan, sandbox_id, step))
                self._lease_watchers.add(watcher)
                watcher.add_done_callback(self._lease_watchers.discard)

    async def _lease_end_met(self, plan: RunPlan, sandbox_id: str, step: int) -> None:
        """Whether the lease end made just now was met: the sandbox paused (a look at an
        expired sandbox pauses it, as any engine access does), or an extension the run made
        meanwhile moved the lease out of the way."""
        run = plan.run_id
        give_up = time.monotonic() + LEASE_MET_WITHIN
        while time.monotonic() < give_up:
            state = await asyncio.to_thread(self._state, plan, sandbox_id)
            if state == "paused":
                self.lease_ends[run] = self.lease_ends.get(run, 0) + 1
                self.note(f"lease end met: {run} sandbox {sandbox_id} after step {step}")
                return
            if state != "running":
                self.note(f"lease end made: {sandbox_id} {state} before it came")
                return
            await asyncio.sleep(LEASE_MET_LOOK_EVERY)
        self.lease_ends_preempted[run] = self.lease_ends_preempted.get(run, 0) + 1
        self.note(f"lease end made: {run} sandbox {sandbox_id} extended before it came")

    async def _dead_man(self) -> None:
        """Every worker SIGKILLed at once and every running sandbox's lease ended: with nobody
        left to extend or wake them, they must pause; the workers come back after a while."""
        if self.size.dead_man_at is None:
            return
        assert self.pool is not None
        await asyncio.sleep(self.size.dead_man_at)
        # One fault at a time: no new lease end with workers alive from now on, and one made
        # already is handled (met and woken, or extended away) first.
        self.dead_man_active = True
        give_up = time.monotonic() + LEASE_HANDLED_WITHIN
        while time.monotonic() < give_up and (
            self._making_lease_ends or await asyncio.to_thread(self._lease_end_pending)
        ):
            await asyncio.sleep(LEASE_LOOK_EVERY)
        async with self.workers_lock:
            nobody_since = time.time()
            try:
                for worker in self.pool.workers:
                    self.pool.kill(worker, counted=False)
                ended = []
                for plan in self.plans:
                    if plan.run_id in self.results:
                        continue
                    for sandbox_id in await asyncio.to_thread(self._sandboxes_running, plan):
                        await asyncio.to_thread(self._end_lease, plan, sandbox_id)
                        ended.append((plan, sandbox_id))
                self.note(
                    f"SIGKILL every worker for {self.size.dead_man_seconds:.0f}s; "
                    f"lease ended for {len(ended)} running sandbox(es)"
                )
                killed_at = time.monotonic()
                await asyncio.sleep(DEAD_MAN_LOOK_AFTER)
                for plan, sandbox_id in ended:
                    state = await self._state_settled(plan, sandbox_id)
                    run = plan.run_id
                    self.lease_ends_unwatched[run] = self.lease_ends_unwatched.get(run, 0) + 1
                    if state == "paused":
                        self.paused_unwatched[run] = self.paused_unwatched.get(run, 0) + 1
                        # Paused must mean frozen: nothing of the agent runs (its cgroup).
                        if not await asyncio.to_thread(agent_runs_unfrozen, run):
                            self.frozen_unwatched[run] = self.frozen_unwatched.get(run, 0) + 1
                        else:
                            self.note(f"{sandbox_id} is paused but its agent still runs")
                    else:
                        self.note(f"{sandbox_id} is {state} at its lease end with no worker")
                waited = time.monotonic() - killed_at
                await asyncio.sleep(max(0.0, self.size.dead_man_seconds - waited))
            finally:
                for worker in self.pool.workers:
                    if worker.process is None:
                        self.pool.start(worker)
                self.no_worker_spans.append((nobody_since, time.time()))
                self.dead_man_active = False
                self.dead_man_windows += 1
            self.note("workers started again after the dead man's window")

    def _lease_end_pending(self) -> bool:
        """Whether a sandbox whose lease the harness ended with workers alive is still
        waiting to be woken (about to pause, or paused)."""
        for plan, sandbox_id in self.lease_ended:
            meta = self._engine(plan).find(sandbox_id)
            if meta is None or meta.state == "stopped":
                continue
            if meta.state == "paused" or (meta.deadline or 0) <= time.time() + 1:
                return True
        return False

    def _engine(self, plan: RunPlan) -> LocalEngine:
        return LocalEngine(self.local_home if plan.provider == "local" else self.runtime_home)

    def _sandboxes_running(self, plan: RunPlan) -> list[str]:
        found = self._engine(plan).list_sandboxes({LABEL_RUN: plan.run_id})
        return [meta.id for meta in found if meta.state == "running"]

    def _running_sandbox(self, plan: RunPlan) -> tuple[str, int | None] | None:
        """The run's newest running sandbox and the step its checkpoint holds."""
        engine = self._engine(plan)
        running = [
            meta
            for meta in engine.list_sandboxes({LABEL_RUN: plan.run_id})
            if meta.state == "running"
        ]
        if not running:
            return None
        newest = max(running, key=lambda meta: int(meta.labels.get(LABEL_ATTEMPT, "0")))
        path = engine.host_path(newest.id, "/workspace/checkpoint.json")
        return newest.id, checkpoint_step(path)

    def _end_lease(self, plan: RunPlan, sandbox_id: str) -> None:
        """Time passes: the sandbox's lease ends in a moment (whatever its lease was)."""
        if plan.provider == "runtime":
            self.fake.end_lease_in(sandbox_id, LEASE_ENDS_IN)
        else:
            LocalEngine(self.local_home).set_lease_end(sandbox_id, time.time() + LEASE_ENDS_IN)

    async def _state_settled(self, plan: RunPlan, sandbox_id: str) -> str:
        """The sandbox's state once its lease end has been met, or as it is after
        `DEAD_MAN_PATIENCE` more (a loaded machine runs the sandbox's own lease look late)."""
        give_up = time.monotonic() + DEAD_MAN_PATIENCE
        while True:
            state = await asyncio.to_thread(self._state, plan, sandbox_id)
            if state == "paused" or time.monotonic() >= give_up:
                return state
            await asyncio.sleep(LEASE_LOOK_EVERY)

    def _state(self, plan: RunPlan, sandbox_id: str) -> str:
        meta = self._engine(plan).find(sandbox_id)
        return "missing" if meta is None else meta.state

    async def _restart_server(self) -> None:
        if self.size.server_restart_at is None:
            return
        await asyncio.sleep(self.size.server_restart_at)
        self.server.kill()
        self.note("SIGKILL dev server")
        await asyncio.sleep(self.size.server_down_seconds)
        await self.server.start()
        self.note("dev server started again on the same database")

    # --- what is left ------------------------------------------------------------------------

    async def _collect(self, seconds: float) -> ChaosReport:
        assert self.pool is not None
        try:
            await self.pool.wait_ready(timeout=90)  # queries of closed runs need a worker
        except (TimeoutError, RuntimeError) as error:
            self.note(f"workers not all ready for the final queries: {error}")
            self.pool.revive_dead()
        facts = [await self._facts(plan) for plan in self.plans]
        infra = {
            "worker SIGKILL + restart": self.pool.kills,
            "every worker SIGKILLed at once (dead man's window)": self.dead_man_windows,
            "dev server SIGKILL + restart": self.server.kills,
        }
        for name, count in (self.storm.counts if self.storm else {}).items():
            infra[f"Runtime API {name}"] = count
        return ChaosReport(
            runs=facts,
            infra_faults=infra,
            worker_self_exits=self.pool.self_exits,
            seconds=seconds,
            notes=list(self._log),
        )

    async def _facts(self, plan: RunPlan) -> RunFacts:
        assert self.client is not None
        outcome = self.results.get(plan.run_id)
        facts = RunFacts(plan=plan)
        if isinstance(outcome, RunResult):
            facts.result = outcome
        else:
            facts.failure = outcome or "no outcome"
        status = await self._status(plan.run_id)
        facts.status_unreadable = status is None
        if status is not None:
            facts.restarts = list(status.restarts)
            facts.fresh_starts = status.fresh_starts_used
            facts.lease_resumes = status.lease_resumes
            if facts.failure and status.attention_reason:
                facts.failure += f"; needs attention: {status.attention_reason}"
        ledger = self.ledgers[plan.run_id]
        facts.ledger_keys = [str(entry.get("key")) for entry in ledger_entries(ledger)]
        markers = list(ledger.parent.glob(f".{plan.run_id}.*"))
        facts.fired_switches = sorted(p.name.split(".", 2)[2] for p in markers)
        facts.stalls_began = [p.stat().st_mtime for p in markers if ".stalled-at-" in p.name]
        facts.stall_seconds = self.size.stall_seconds
        facts.no_worker_spans = list(self.no_worker_spans)
        home = self.local_home if plan.provider == "local" else self.runtime_home
        engine = LocalEngine(home)
        for meta in await asyncio.to_thread(engine.list_sandboxes, include_stopped=True):
            if meta.labels.get("overnight-run") != plan.run_id:
                continue
            attempt = int(meta.labels.get("overnight-attempt", "0"))
            step = checkpoint_step(engine.host_path(meta.id, "/workspace/checkpoint.json"))
            if step is not None:
                facts.sandbox_steps[attempt] = step
            if meta.state == "running":
                facts.sandboxes_running.append(meta.id)
            elif meta.state == "paused":
                facts.sandboxes_paused.append(meta.id)
        facts.live_agent_pids = agent_pids(plan.run_id)
        facts.branch_commits = await asyncio.to_thread(
            branch_commits, self.origins[plan.run_id], f"agent/{plan.run_id}"
        )
        facts.lease_ends = self.lease_ends.get(plan.run_id, 0)
        facts.lease_ends_preempted = self.lease_ends_preempted.get(plan.run_id, 0)
        facts.lease_ends_unwatched = self.lease_ends_unwatched.get(plan.run_id, 0)
        facts.paused_unwatched = self.paused_unwatched.get(plan.run_id, 0)
        facts.frozen_unwatched = self.frozen_unwatched.get(plan.run_id, 0)
        return facts

    async def _status(self, run_id: str) -> RunStatus | None:
        assert self.client is not None
        error: Exception | None = None
        for _ in range(5):
            try:
                return await api.get_status(self.client, run_id)
            except Exception as failed:  # a query of a closed run may meet a worker restarting
                error = failed
                await asyncio.sleep(2)
        self.note(f"status of {run_id} unreadable: {type(error).__name__}: {error}")
        return None


def agent_runs_unfrozen(run_id: str) -> bool:
    """Whether a process of the run's agent (not its launcher, which watches from outside
    the sandbox) exists and is not held: an agent that already ended runs nothing."""
    agents = [pid for pid in agent_pids(run_id) if b"local/launcher.py" not in _cmdline(pid)]
    return bool(agents) and not agent_frozen(run_id)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def branch_commits(origin: Path, branch: str) -> list[str]:
    """Subjects of the commits on `branch` in the bare repository `origin`, oldest first."""
    done = subprocess.run(
        [
            "git",
            "--git-dir",
            str(origin),
            "log",
            "--reverse",
            "--format=%s",
            f"refs/heads/{branch}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.splitlines() if done.returncode == 0 else []


async def run_chaos(size: ChaosSize, folder: Path, say: Say = print) -> ChaosReport:
    return await Chaos(size, folder, say).run()


def report_json(report: ChaosReport) -> str:
    return json.dumps({"figures": report.figures(), "infra_faults": report.infra_faults}, indent=1)
