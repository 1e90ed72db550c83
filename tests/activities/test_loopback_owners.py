"""The host_ports guard knows the ports from their sockets (issue #30, item 7): a spec may not
list any port the Temporal server, this worker, the codec server or the metrics endpoint
listens on. Before, only the frontend's port and port + 1000 were refused, and the dev
server's HTTP API (which answers /api/v1/namespaces, no credentials asked) was not.

A real dev server, a real Prometheus endpoint of the Temporal SDK in this process, a real
`overnight codec-server` process; a plain test service stays allowed.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.testing import ActivityEnvironment

from activities.models import CreateSandboxInput, SpecCheckInput
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.sandbox.activities import SandboxActivities
from overnight.core.grants import SPEC_REFUSED, Grants
from overnight.core.models import RunSpec
from overnight.demo.outside_world import host_ports_for, ledger_url
from overnight.worker.devserver import DevServer
from tests.conftest import free_port
from tests.waits import CAP


def listening_ports_of(pid: int) -> set[int]:
    """The test's own look (not the code's): TCP ports in LISTEN whose socket `pid` holds."""
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            held.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            if cols[3] == "0A" and f"socket:[{cols[9]}]" in held:
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def answers_namespaces(port: int) -> bool:
    try:
        url = f"http://127.0.0.1:{port}/api/v1/namespaces"
        with urllib.request.urlopen(url, timeout=2) as reply:
            return "namespaces" in json.loads(reply.read())
    except Exception:
        return False


def wait_listening(port: int, seconds: float = CAP) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


@pytest.fixture
def plain_service() -> Iterator[int]:
    """A test service the agent is meant to reach, as in tests/e2e/test_hostile_agent.py: a
    child of this (the worker's) process."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(port)
        yield port
    finally:
        server.kill()
        server.wait()


@pytest.fixture
def codec_server(overnight_home: Path) -> Iterator[int]:
    """`overnight codec-server` in a process of its own, as an operator runs it."""
    port = free_port()
    key = base64.b64encode(os.urandom(32)).decode()
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "overnight"), "codec-server", "--port", str(port)],
        env={**os.environ, "OVERNIGHT_CODEC_KEYS": f"k1:{key}"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(port)
        yield port
    finally:
        server.terminate()
        server.wait()


@pytest.fixture
async def activities(dev_client: Client, tmp_path: Path) -> AsyncIterator[SandboxActivities]:
    engine = LocalEngine(tmp_path / "home")
    providers = {"local": LocalProvider(engine)}
    async with SandboxActivities(dev_client, providers=providers, grants=Grants()) as made:
        yield made
    assert engine.list_sandboxes() == []  # refused before anything was made


def spec_with(tmp_path: Path, ports: list[int]) -> RunSpec:
    (tmp_path / "agent").mkdir(exist_ok=True)
    # A real repository: the spec check refuses a `repo` git cannot read (activities/repo_check).
    if not (tmp_path / "repo").exists():
        subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    return RunSpec(
        run_id=f"ports-{uuid.uuid4().hex[:8]}",
        repo=str(tmp_path / "repo"),
        agent_dir=str(tmp_path / "agent"),
        command="true",
        host_ports=ports,
    )


async def refusals(activities: SandboxActivities, spec: RunSpec) -> list[str]:
    checked = await ActivityEnvironment().run(activities.check_spec, SpecCheckInput(spec=spec))
    return checked.refusals


async def test_every_port_of_the_dev_server_is_refused_not_only_the_frontend(
    dev_server: DevServer, activities: SandboxActivities, tmp_path: Path
) -> None:
    assert dev_server.process is not None
    frontend = int(dev_server.address.rpartition(":")[2])
    ui = int(dev_server.ui_url.rpartition(":")[2])
    ports = listening_ports_of(dev_server.process.pid)
    others = sorted(ports - {frontend, ui})
    http_api = [port for port in others if answers_namespaces(port)]
    assert len(http_api) == 1, (ports, others)  # the way in the old guard left open
    internal = [port for port in others if port not in http_api]
    assert internal, ports  # its own services (history, matching, ...) on loopback too
    for port in [*http_api, internal[0], ui, frontend]:
        [found] = await refusals(activities, spec_with(tmp_path, [port]))
        assert found.startswith(f"field host_ports: {port} is "), found
        assert "Temporal server" in found and "which no sandbox may reach" in found, found
    # The steps that make a sandbox refuse it again, as the run's SpecRefused error.
    with pytest.raises(ApplicationError) as refused:
        run = spec_with(tmp_path, http_api)
        await ActivityEnvironment().run(
            activities.create_sandbox, CreateSandboxInput(spec=run, attempt=1)
        )
    assert refused.value.type == SPEC_REFUSED and refused.value.non_retryable
    assert f"host_ports: {http_api[0]} is a port of the Temporal server" in refused.value.message


async def test_the_metrics_endpoint_and_the_codec_server_are_refused(
    activities: SandboxActivities, codec_server: int, tmp_path: Path
) -> None:
    metrics = free_port()
    runtime = Runtime(
        telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=f"127.0.0.1:{metrics}"))
    )
    try:
        wait_listening(metrics)
        [found] = await refusals(activities, spec_with(tmp_path, [metrics]))
        assert found.startswith(f"field host_ports: {metrics} is a port of this worker's own")
    finally:
        del runtime
    [found] = await refusals(activities, spec_with(tmp_path, [codec_server]))
    assert f"{codec_server} is a port of overnight's codec-server (process " in found, found


async def test_a_plain_service_and_the_workers_own_ledger_stay_allowed(
    activities: SandboxActivities, plain_service: int, tmp_path: Path
) -> None:
    # The demo's ledger runs in the worker's own process, served to agents on purpose.
    ledger = host_ports_for(ledger_url(tmp_path / "ledger.jsonl"))
    nobody = free_port()  # nothing listens: nothing to refuse either
    assert await refusals(activities, spec_with(tmp_path, [plain_service, *ledger, nobody])) == []


DECLARED_WORKER = """
import socket, sys, time
from overnight.core.local_services import Declared, serve_to_agents
meant, other = (socket.create_server(("127.0.0.1", int(p))) for p in sys.argv[1:3])
with Declared("worker"):
    serve_to_agents(int(sys.argv[1]))
    print("ready", flush=True)
    time.sleep(120)
"""


async def test_another_workers_process_is_refused_but_for_the_ports_it_serves_to_agents(
    activities: SandboxActivities, overnight_home: Path, tmp_path: Path
) -> None:
    """A process that runs a worker and serves an agent's outside world too (a benchmark's,
    a test's): other workers honour the ports its declaration says are for agents, and still
    refuse the rest of its ports."""
    meant, other = free_port(), free_port()
    declared = subprocess.Popen(
        [sys.executable, "-c", DECLARED_WORKER, str(meant), str(other)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert declared.stdout is not None and declared.stdout.readline().strip() == "ready"
        [found] = await refusals(activities, spec_with(tmp_path, [meant, other]))
        assert found.startswith(f"field host_ports: {other} is a port of overnight's worker"), found
    finally:
        declared.kill()
        declared.communicate()
