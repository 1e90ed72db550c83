"""Two hosts on one machine: a dev server and a `python worker.py` per host, each with its own
`OVERNIGHT_HOME` and `OVERNIGHT_HOST` (so its own host queue), running local runs of the
counting agent; the test stops, kills and starts the hosts' workers (tests/chaos/stack.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError

from activities.providers.local.engine import LocalEngine
from overnight.cli import client as api
from overnight.core.grants import WRITABLE_BIND_ROOTS_ENV
from overnight.core.hosts import HOST_ENV, HOST_LOST_ENV
from overnight.core.models import RunStatus
from tests.chaos.stack import ChaosServer, WorkerPool, WorkerProcess, chaos_dev_config, worker_env
from tests.conftest import REPO_ROOT
from tests.e2e.counting import counting_spec

# Short for the test (the default is 180 s): a third of it is how long a step waits in a host
# queue before the run asks whether the host is there.
LOST_SECONDS = 24
LOOK_EVERY = 0.25
OVERNIGHT = Path(sys.executable).parent / "overnight"


class Host:
    """One host: its home and its one worker process (a pool of one)."""

    def __init__(
        self,
        key: str,
        name: str,
        folder: Path,
        env: dict[str, str],
        task_queue: str,
        repo_root: Path = REPO_ROOT,
    ) -> None:
        self.name = name
        self.home = folder / f"home-{key}"
        env = {**env, "OVERNIGHT_HOME": str(self.home), HOST_ENV: name}
        (folder / key).mkdir(parents=True, exist_ok=True)
        self.pool = WorkerPool(1, env, task_queue, folder / key, repo_root)
        self.engine = LocalEngine(self.home)

    @property
    def worker(self) -> WorkerProcess:
        return self.pool.workers[0]

    @property
    def identity(self) -> str:
        """How the server names this host's worker process (`pid@machine`), its pid part."""
        assert self.worker.process is not None
        return f"{self.worker.process.pid}@"

    async def start(self) -> None:
        self.pool.start(self.worker)
        await self.pool.wait_ready()

    def sigterm(self) -> float:
        """Stop the worker gracefully (a deploy); the seconds it took to exit."""
        process = self.worker.process
        assert process is not None
        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        self.worker.process = None
        return time.monotonic() - began

    def sigkill(self) -> None:
        self.pool.kill(self.worker)

    def stop(self) -> None:
        self.pool.stop_all()

    async def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`overnight ARGS` run on this host: with its worker's environment."""
        return await asyncio.to_thread(
            subprocess.run,
            [str(OVERNIGHT), *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=self.pool.env,
        )


class TwoHosts:
    """A dev server, hosts `a` and `b` (`OVERNIGHT_HOST` host-a and host-b; workers not
    started), and a client, in `folder`. `repo_root`: the checkout the workers run (a
    benchmark's baseline: the code before host queues)."""

    def __init__(self, folder: Path, repo_root: Path = REPO_ROOT) -> None:
        self.folder = folder
        self.repo_root = repo_root
        self.ledgers: dict[str, Path] = {}
        self.server = ChaosServer(chaos_dev_config(folder / "temporal"))
        self.task_queue = f"hosts-{uuid.uuid4().hex[:6]}"
        self.hosts: dict[str, Host] = {}
        self.client: Client | None = None
        self.run_ids: list[str] = []

    async def __aenter__(self) -> TwoHosts:
        self.folder.mkdir(parents=True, exist_ok=True)
        await self.server.start()
        env = worker_env(
            dict(os.environ),
            {
                "TEMPORAL_ADDRESS": self.server.address,
                "TEMPORAL_NAMESPACE": self.server.config.namespace,
                HOST_LOST_ENV: str(LOST_SECONDS),
                WRITABLE_BIND_ROOTS_ENV: str(self.folder / "runs"),
            },
        )
        for key in ("a", "b"):
            self.hosts[key] = Host(
                key, f"host-{key}", self.folder, env, self.task_queue, self.repo_root
            )
        self.client = await Client.connect(
            self.server.address,
            namespace=self.server.config.namespace,
            data_converter=pydantic_data_converter,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.client is not None:
            for run_id in self.run_ids:
                with contextlib.suppress(RPCError):
                    handle = self.client.get_workflow_handle(run_id)
                    if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                        await handle.terminate("many-hosts test done")
        for host in self.hosts.values():
            await asyncio.to_thread(host.stop)
            for meta in await asyncio.to_thread(host.engine.list_sandboxes, include_stopped=False):
                await asyncio.to_thread(host.engine.stop, meta.id)
        self.server.stop()

    async def start_run(self, name: str, steps: int = 600, step_seconds: float = 1) -> str:
        """A counting agent that checkpoints every `step_seconds` (for minutes by default)."""
        assert self.client is not None
        run_id = f"{self.task_queue}-{name}"
        spec, ledger = counting_spec(
            run_id,
            self.folder / "runs",
            "local",
            agent_env={"AGENT_STEPS": str(steps), "AGENT_STEP_SECONDS": str(step_seconds)},
            stall_seconds=300,
            sandbox_timeout_seconds=900,
        )
        await api.start_run(self.client, spec, task_queue=self.task_queue)
        self.run_ids.append(run_id)
        self.ledgers[run_id] = ledger
        return run_id

    async def status(self, run_id: str) -> RunStatus:
        assert self.client is not None
        status: RunStatus = await self.client.get_workflow_handle(run_id).query(
            "status", result_type=RunStatus
        )
        return status

    async def until_status(
        self, run_id: str, accept: object, what: str, timeout: float
    ) -> RunStatus:
        assert callable(accept)
        deadline = time.monotonic() + timeout
        status = None
        while time.monotonic() < deadline:
            with contextlib.suppress(RPCError):
                status = await self.status(run_id)
                if accept(status):
                    return status
            await asyncio.sleep(LOOK_EVERY)
        raise AssertionError(f"{run_id}: {what}: not in {timeout:.0f} s (last: {status})")

    async def scheduled(self, run_id: str, activity: str) -> int:
        """How many times the run's history scheduled `activity`."""
        assert self.client is not None
        count = 0
        async for event in self.client.get_workflow_handle(run_id).fetch_history_events():
            if event.HasField("activity_task_scheduled_event_attributes"):
                scheduled = event.activity_task_scheduled_event_attributes
                count += scheduled.activity_type.name == activity
        return count

    async def watched_by(self, run_id: str, host: Host, timeout: float) -> float:
        """Until the run's observe is started by `host`'s current worker; the seconds it took."""
        assert self.client is not None
        began = time.monotonic()
        identity = host.identity
        while time.monotonic() - began < timeout:
            with contextlib.suppress(RPCError):
                described = await self.client.get_workflow_handle(run_id).describe()
                for pending in described.raw_description.pending_activities:
                    started = pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
                    if (
                        pending.activity_type.name == "observe_agent"
                        and started
                        and pending.last_worker_identity.startswith(identity)
                    ):
                        return time.monotonic() - began
            await asyncio.sleep(LOOK_EVERY)
        raise AssertionError(f"{run_id}: not watched by {host.name} in {timeout:.0f} s")
