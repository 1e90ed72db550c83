"""The real stack the chaos harness shakes: a dev server it can kill, and worker processes.

The dev server is started from temporal-dev.yaml, moved to free ports and a SQLite file in
the chaos folder, so a restart finds every run again. Workers are `python worker.py`
subprocesses configured only through their environment, as in production.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from overnight.worker.devconfig import DevConfig, load_dev_config
from overnight.worker.devserver import DevServer, start_or_reuse
from tests.conftest import DEV_CONFIG_FILE, REPO_ROOT, free_ports

WORKER_READY_LINE = "worker polling task queue"
# Variables of this process a worker must not inherit: it gets exactly the chaos ones.
_DROPPED_ENV_PREFIXES = ("TEMPORAL_", "RUNTIME_", "OVERNIGHT_", "HTTP_PROXY", "HTTPS_PROXY")


def chaos_dev_config(state_dir: Path) -> DevConfig:
    port, ui_port = free_ports(2)
    return load_dev_config(DEV_CONFIG_FILE).with_overrides(
        port=port,
        ui_port=ui_port,
        db_file=state_dir / "dev.sqlite",
        log_file=state_dir / "dev-server.log",
    )


class ChaosServer:
    """A dev server that can be SIGKILLed and started again on the same database file."""

    def __init__(self, config: DevConfig) -> None:
        self.config = config
        self.server: DevServer | None = None
        self.kills = 0

    @property
    def address(self) -> str:
        return self.config.address

    async def start(self) -> None:
        self.server = await start_or_reuse(self.config, stop_with_parent=True)
        assert self.server.started_here, f"something else answers at {self.address}"

    def kill(self) -> None:
        """SIGKILL the server's whole process group: no chance to flush or say goodbye."""
        assert self.server is not None and self.server.process is not None
        process = self.server.process
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        self.server.process = None
        self.kills += 1

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


def worker_env(base: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in base.items()
        if not k.upper().startswith(_DROPPED_ENV_PREFIXES) and k.lower() != "all_proxy"
    }
    env.update(extra)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _die_with_parent() -> None:
    # Between fork and exec: SIGKILL this worker if the harness dies without stopping it.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


@dataclass
class WorkerProcess:
    name: str
    log_file: Path
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    started: int = 0
    # Where in the log the current start begins: readiness is looked for after it.
    ready_from: int = 0
    killed: int = 0
    exited_alone: int = 0
    exit_codes: list[int] = field(default_factory=list)


class WorkerPool:
    """`count` worker processes on one task queue; kill and restart them at will."""

    def __init__(
        self,
        count: int,
        env: dict[str, str],
        task_queue: str,
        log_dir: Path,
        repo_root: Path = REPO_ROOT,
    ) -> None:
        """`repo_root`: the checkout whose `worker.py` (and code) the workers run."""
        self.env = env
        self.task_queue = task_queue
        self.repo_root = repo_root
        self.workers = [
            WorkerProcess(f"worker-{i + 1}", log_dir / f"worker-{i + 1}.log") for i in range(count)
        ]

    def start(self, worker: WorkerProcess) -> None:
        if worker.log is None:
            worker.log = worker.log_file.open("ab")
        worker.log.write(f"\n--- {time.strftime('%H:%M:%S')} start ---\n".encode())
        worker.log.flush()
        worker.ready_from = worker.log.tell()
        worker.process = subprocess.Popen(
            [sys.executable, str(self.repo_root / "worker.py"), "--task-queue", self.task_queue],
            cwd=self.repo_root,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=worker.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        worker.started += 1

    def start_all(self) -> None:
        for worker in self.workers:
            self.start(worker)

    async def wait_ready(self, timeout: float = 60) -> None:
        """Until every worker has said, since its latest start, that it polls."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self._ready(w) for w in self.workers):
                return
            for worker in self.workers:
                if worker.process is not None and worker.process.poll() is not None:
                    raise RuntimeError(f"{worker.name} exited; see {worker.log_file}")
            await asyncio.sleep(0.2)
        raise TimeoutError(f"workers did not start polling in {timeout}s")

    def _ready(self, worker: WorkerProcess) -> bool:
        try:
            with worker.log_file.open("rb") as log:
                log.seek(worker.ready_from)
                return WORKER_READY_LINE.encode() in log.read()
        except OSError:
            return False

    def kill(self, worker: WorkerProcess, *, counted: bool = True) -> None:
        """SIGKILL the worker process itself (its agents live in their own sessions).
        `counted`: one of the kills `kills` reports (not one of a window with none alive)."""
        if worker.process is not None and worker.process.poll() is None:
            os.kill(worker.process.pid, signal.SIGKILL)
            worker.process.wait()
            worker.killed += counted
        worker.process = None

    def revive_dead(self) -> int:
        """Start again any worker that exited on its own (e.g. while the server was down)."""
        revived = 0
        for worker in self.workers:
            if worker.process is not None and worker.process.poll() is not None:
                worker.exit_codes.append(worker.process.returncode)
                worker.exited_alone += 1
                self.start(worker)
                revived += 1
        return revived

    def stop_all(self, grace: float = 20) -> None:
        for worker in self.workers:
            if worker.process is not None and worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)
        for worker in self.workers:
            if worker.process is not None:
                try:
                    worker.process.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    self.kill(worker)
            worker.process = None
            if worker.log is not None:
                worker.log.close()
                worker.log = None

    @property
    def kills(self) -> int:
        return sum(w.killed for w in self.workers)

    @property
    def self_exits(self) -> int:
        return sum(w.exited_alone for w in self.workers)
