"""The world of the gateway benchmark: a home of its own, the gateway running in this process
(as it runs in the worker's), a hosts file naming the loopback server `bench.test` (the worker
names 127.0.0.1 as reachable, as a company names its mirror), the server in a process of its
own, and the CPU readings of each."""

from __future__ import annotations

import base64
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from activities.gateway.resolve import Resolver
from activities.gateway.service import Gateway
from activities.providers.local.engine import LocalEngine
from activities.providers.local.netns import RELAY
from bench.report import REPO_ROOT
from overnight.core.egress import parse_address_rules

NAME = "bench.test"
SERVER_READY_SECONDS = 10.0
PROCESS_WAIT_SECONDS = 120.0
CLIENT = Path(__file__).with_name("gateway_client.py")
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class World:
    home: Path
    engine: LocalEngine
    gateway: Gateway
    server: subprocess.Popen[bytes]
    port: int
    file_bytes: int

    def url(self, host: str = NAME) -> str:
        return f"http://{host}:{self.port}/file"


@contextmanager
def world(file_bytes: int, addresses: list[str]) -> Iterator[World]:
    """Everything up; on the way out every sandbox of the home stopped, the server and the
    gateway ended and the home deleted."""
    home = Path(tempfile.mkdtemp(prefix="overnight-bench-gateway-"))
    hosts = home / "bench-hosts"
    hosts.write_text(f"127.0.0.1 {NAME}\n")
    served = home / "served"
    with open(served, "wb") as file:
        file.truncate(file_bytes)  # sparse: the page cache holds zeros, no disk read
    gateway = Gateway(
        home, resolver=Resolver(str(hosts)), address_rules=parse_address_rules("127.0.0.1")
    )
    gateway.start()
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.gateway_server", str(served), "127.0.0.1", *addresses],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
    )
    engine = LocalEngine(home)
    try:
        port = _read_port(server)
        yield World(home, engine, gateway, server, port, file_bytes)
    finally:
        for meta in engine.list_sandboxes():
            if meta.state != "stopped":
                engine.stop(meta.id)
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()
        gateway.stop()
        shutil.rmtree(home, ignore_errors=True)


def _read_port(server: subprocess.Popen[bytes]) -> int:
    assert server.stdout is not None
    ready, _, _ = select.select([server.stdout], [], [], SERVER_READY_SECONDS)
    line = server.stdout.readline() if ready else b""
    if not line.strip().isdigit():
        raise RuntimeError(f"the benchmark's server did not start (said {line!r})")
    return int(line)


def client_command(mode: str, port: int, go: str, out: str, seconds: float) -> str:
    """The request loop of `bench/gateway_client.py`, inline for the sandbox's python3."""
    code = base64.b64encode(CLIENT.read_bytes()).decode()
    run = f"import base64; exec(compile(base64.b64decode('{code}'), 'gateway_client', 'exec'))"
    return f'python3 -I -c "{run}" {mode} {NAME} {port} {go} {out} {seconds}'


def write_whole(path: Path, text: str) -> None:
    """`text` into `path`, renamed into place: a sandbox waiting for the file never reads
    half of it."""
    part = path.with_name(f".{path.name}")
    part.write_text(text)
    part.rename(path)


def wait_ended(engine: LocalEngine, sid: str, process_id: str) -> None:
    give_up = time.monotonic() + PROCESS_WAIT_SECONDS
    while (found := engine.process(sid, process_id)) and found.state == "running":
        if time.monotonic() > give_up:
            raise RuntimeError(f"the agent {process_id} of {sid} did not end")
        time.sleep(0.05)


def process_cpu(pid: int) -> float:
    """CPU seconds (user and system) a process has used, 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def relay_cpu(gateway_port: int) -> float:
    """CPU seconds used so far by the running relays that carry `gateway_port` (this
    benchmark's sandboxes', not those of anything else on the machine): an agent's relay
    lives as long as the agent."""
    script, port = str(RELAY).encode(), str(gateway_port).encode()
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if script in argv and port in argv[argv.index(script) + 3 :]:
            total += process_cpu(int(entry.name))
    return total


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy (all cores), from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values[:8]) - idle) / TICKS


@dataclass
class CpuReading:
    at: float
    gateway: float  # this whole process: the gateway's thread and a main thread that sleeps
    relays: float
    server: float
    machine: float


def read_cpu(world: World) -> CpuReading:
    return CpuReading(
        at=time.monotonic(),
        gateway=time.process_time(),
        relays=relay_cpu(world.gateway.port or 0),
        server=process_cpu(world.server.pid),
        machine=machine_busy(),
    )
