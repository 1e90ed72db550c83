"""Processes the benchmark runs and measures: the dev server and worker subprocesses.

CPU and memory come from /proc (Linux): CPU is user + system time of the process (all its
threads), memory its resident set (VmRSS).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path

from overnight.worker.devconfig import default_dev_config
from overnight.worker.devserver import DevServer, start_or_reuse

REPO_ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT_SECONDS = 60.0
# The worker is done with by then: a graceful shutdown is nice, not needed.
STOP_TIMEOUT_SECONDS = 20.0


# How far below the ephemeral range ports are drawn from.
EPHEMERAL_GAP = 12000


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports on 127.0.0.1, below the kernel's ephemeral range (each
    socket held until all are chosen). A port given back until a server binds it (a dev
    server started again on the same ports) is then never taken meanwhile by one of the
    machine's outgoing connections, which draw theirs from that range: with four test
    processes, a restarted dev server's UI port was."""
    low = ephemeral_low()
    with ExitStack() as stack:
        ports: list[int] = []
        while len(ports) < count:
            port = random.randrange(max(1024, low - EPHEMERAL_GAP), low)
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                sock.bind(("127.0.0.1", port))  # a port drawn twice is held: refused here
            except OSError:
                continue
            ports.append(port)
        return ports


def ephemeral_low() -> int:
    """The first port of the kernel's range for outgoing connections (Linux's default: 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def busy_cpu_seconds() -> float:
    """CPU time the whole machine spent busy so far (all cores, all processes)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@asynccontextmanager
async def dev_server(state_dir: Path) -> AsyncIterator[DevServer]:
    """A dev server from temporal-dev.yaml on free ports with a database under `state_dir`."""
    port, ui_port = free_ports(2)
    config = default_dev_config().with_overrides(
        port=port,
        ui_port=ui_port,
        db_file=state_dir / "dev.sqlite",
        log_file=state_dir / "dev-server.log",
    )
    server = await start_or_reuse(config, stop_with_parent=True)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


class WorkerProcess:
    """A `bench.worker_main` subprocess: started, awaited until it polls, measured, stopped."""

    ENTRY = ("-m", "bench.worker_main")

    def __init__(
        self,
        args: Sequence[str],
        log_file: Path,
        metrics_port: int | None = None,
        env: Mapping[str, str | None] | None = None,
    ):
        self._args = list(args)
        self._log_file = log_file
        self.metrics_port = metrics_port
        # Changes to this process's environment for the worker (None: removed).
        self._env = dict(env or {})
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    async def start(self) -> None:
        ready_file = self._log_file.with_suffix(".ready")
        ready_file.unlink(missing_ok=True)
        args = [sys.executable, *self.ENTRY, *self._args]
        args += ["--ready-file", str(ready_file)]
        if self.metrics_port is not None:
            args += ["--metrics-port", str(self.metrics_port)]
        # All output to the log: a pipe nobody reads would fill up and block the worker.
        with self._log_file.open("ab") as log:
            self._process = subprocess.Popen(
                args,
                cwd=REPO_ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self._environ() if self._env else None,
            )
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while not ready_file.exists():
            if self._process.poll() is not None or time.monotonic() > deadline:
                await self.stop()
                raise RuntimeError(f"benchmark worker did not start; see {self._log_file}")
            await asyncio.sleep(0.1)

    def _environ(self) -> dict[str, str]:
        merged: dict[str, str | None] = {**os.environ, **self._env}
        return {key: value for key, value in merged.items() if value is not None}

    async def stop(self) -> None:
        """SIGTERM (a graceful worker shutdown), then SIGKILL if it takes too long."""
        process, self._process = self._process, None
        if process is None:
            return
        for sig, patience in ((signal.SIGTERM, STOP_TIMEOUT_SECONDS), (signal.SIGKILL, 10.0)):
            if process.poll() is not None:
                break
            process.send_signal(sig)
            deadline = time.monotonic() + patience
            while process.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.1)

    def exit_code(self) -> int | None:
        """None while the worker runs; its exit code once it has ended."""
        return None if self._process is None else self._process.poll()

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def rss_mib(self) -> float:
        return rss_mib(self.pid)

    def metric_total(self, name: str, **labels: str) -> float | None:
        """The sum of a Prometheus counter over the series matching `labels`, if served."""
        if self.metrics_port is None:
            return None
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as page:
                text = page.read().decode()
        except OSError:
            return None
        total = 0.0
        wanted = [f'{key}="{value}"' for key, value in labels.items()]
        for line in text.splitlines():
            if line.startswith(name + "{") and all(label in line for label in wanted):
                total += float(line.rsplit(" ", 1)[1])
        return total


@asynccontextmanager
async def worker_process(
    args: Sequence[str],
    log_file: Path,
    *,
    metrics: bool = False,
    env: Mapping[str, str | None] | None = None,
) -> AsyncIterator[WorkerProcess]:
    worker = WorkerProcess(args, log_file, free_ports(1)[0] if metrics else None, env)
    await worker.start()
    try:
        yield worker
    finally:
        await worker.stop()
