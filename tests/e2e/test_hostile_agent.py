"""An agent is untrusted code: a hostile one, run by a real worker in a real bubblewrap
sandbox, reaches nothing of its supervisor or its host that it was not given.

The agent (tests/agents/hostile) tries each attack from inside and writes what happened to
its checkpoint; each test here reads one attack's outcome. What it tries to reach: a test
host in a network namespace of its own on a private network (there is no internet here),
which its allow-list does not name, and one declared port on the worker's loopback
(`host_ports`).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client

from activities.providers.local.isolation import SANDBOX_PROCESSES_ENV
from overnight.cli import client as api
from overnight.core.home import overnight_home
from overnight.core.models import RunSpec
from overnight.worker.devserver import DevServer
from tests.conftest import free_port
from tests.waits import CAP

AGENT = Path(__file__).resolve().parents[1] / "agents" / "hostile"
ROOT = os.geteuid() == 0
pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or shutil.which("slirp4netns") is None,
        reason="needs bubblewrap and slirp4netns",
    ),
    # One test process runs these, so the test host is set up once.
    pytest.mark.xdist_group("hostile_agent"),
]
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}
# A low cap, so the fork test is cheap; the default is isolation.MAX_PROCESSES.
PROCESS_CAP = 48


@pytest.fixture(scope="module")
def outside_host() -> Iterator[str]:
    """`address:port` of a TCP server on a test host outside this one: a network namespace
    joined to the host by a veth pair (needs root and iproute2).

    The namespace is held by a process and entered by its pid, not named in /run/netns:
    at four test processes a name `ip netns add` had just made did not open ("setting the
    network namespace ... failed: Invalid argument"), its bind mount raced by the bubblewrap
    sandboxes starting beside it."""
    if not ROOT or shutil.which("ip") is None or shutil.which("nsenter") is None:
        pytest.skip("a test host needs root, iproute2 and util-linux")
    name = f"ovt-{secrets.token_hex(3)}"
    octet = 16 + secrets.randbelow(200)
    host_side, far_side = f"10.251.{octet}.1", f"10.251.{octet}.2"
    port = free_port()

    def run(*argv: str) -> None:
        done = subprocess.run(list(argv), capture_output=True, text=True)
        if done.returncode != 0:  # the tool's own words, which CalledProcessError leaves out
            raise AssertionError(f"cannot make the test host: {argv}: {done.stderr.strip()}")

    holder = subprocess.Popen(["unshare", "--net", "sleep", "infinity"])
    inside = ["nsenter", "--target", str(holder.pid), "--net"]
    server = None
    try:
        _wait_own_netns(holder.pid)
        run("ip", "link", "add", f"{name}-a", "type", "veth", "peer", "name", f"{name}-b")
        run("ip", "link", "set", f"{name}-b", "netns", str(holder.pid))
        run("ip", "addr", "add", f"{host_side}/30", "dev", f"{name}-a")
        run("ip", "link", "set", f"{name}-a", "up")
        run(*inside, "ip", "addr", "add", f"{far_side}/30", "dev", f"{name}-b")
        run(*inside, "ip", "link", "set", f"{name}-b", "up")
        run(*inside, "ip", "link", "set", "lo", "up")
        server = subprocess.Popen(
            [*inside, sys.executable, "-m", "http.server", str(port), "--bind", far_side],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_listening(far_side, port)
        yield f"{far_side}:{port}"
    finally:
        for process in (server, holder):
            if process is not None:
                process.kill()
                process.wait()
        # The namespace ends with its last process, and the veth pair with it; in case not:
        subprocess.run(["ip", "link", "del", f"{name}-a"], capture_output=True)


def _wait_own_netns(pid: int) -> None:
    """Until `unshare` has moved `pid` into a network namespace of its own."""
    mine = os.readlink("/proc/self/ns/net")
    # Under a time cap (CAP), not 100 looks of 0.02 s: a loaded machine may start it later.
    give_up = time.monotonic() + CAP
    while time.monotonic() < give_up:
        try:
            if os.readlink(f"/proc/{pid}/ns/net") != mine:
                return
        except FileNotFoundError:
            break
        time.sleep(0.02)
    raise AssertionError(f"unshare --net (pid {pid}) made no network namespace")


def _wait_listening(host: str, port: int) -> None:
    # Under a time cap (CAP), not 100 looks: a loaded machine may start Python slowly.
    give_up = time.monotonic() + CAP
    while time.monotonic() < give_up:
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"the test host's server at {host}:{port} did not come up")


@pytest.fixture(scope="module")
def host_socket() -> Iterator[Path]:
    """A Unix socket in the host's /run, as D-Bus or docker keep theirs."""
    path = Path("/run") / f"overnight-test-{uuid.uuid4().hex[:8]}.sock"
    if not os.access("/run", os.W_OK):
        pytest.skip("needs a writable /run")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        try:
            yield path
        finally:
            path.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def declared_port() -> Iterator[int]:
    """A service on the worker's loopback that the spec lists in `host_ports`."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_listening("127.0.0.1", port)
        yield port
    finally:
        server.kill()
        server.wait()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def probes(
    dev_server: DevServer,
    dev_client: Client,
    task_queue: str,
    tmp_path_factory: pytest.TempPathFactory,
    outside_host: str,
    host_socket: Path,
    declared_port: int,
) -> AsyncIterator[dict[str, Any]]:
    """What the hostile agent found, run once by the session's worker."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "repo").mkdir()
    subprocess.run(["git", "init", "-q", str(root / "repo")], check=True)
    subprocess.run(
        ["git", "-C", str(root / "repo"), "commit", "-q", "--allow-empty", "-m", "empty"],
        check=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        },
    )
    (root / "repo").chmod(0o755)
    run_id = f"hostile-{uuid.uuid4().hex[:8]}"
    spec = RunSpec(
        run_id=run_id,
        repo=str(root / "repo"),
        agent_dir=str(AGENT),
        command="python3 /workspace/agent/main.py",
        env={
            "HOSTILE_FRONTEND_PORT": dev_server.address.rpartition(":")[2],
            "HOSTILE_DECLARED_PORT": str(declared_port),
            "HOSTILE_VENV": str(Path(sys.prefix)),
            "HOSTILE_STATE": str(overnight_home()),
            "HOSTILE_HOST_SOCKET": str(host_socket),
            "HOSTILE_OUTSIDE": outside_host,
            "HOSTILE_FORKS": str(PROCESS_CAP * 2),
        },
        host_ports=[declared_port],
        poll_seconds=1,
        stall_seconds=60,
        sandbox_timeout_seconds=120,
    )
    before = os.environ.get(SANDBOX_PROCESSES_ENV)
    os.environ[SANDBOX_PROCESSES_ENV] = str(PROCESS_CAP)
    try:
        await api.start_run(dev_client, spec, task_queue=task_queue)
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=90)
    finally:
        if before is None:
            os.environ.pop(SANDBOX_PROCESSES_ENV, None)
        else:
            os.environ[SANDBOX_PROCESSES_ENV] = before
    assert result.outcome == "finished", result
    yield json.loads(result.checkpoint or "{}")


def test_the_temporal_frontend_on_the_hosts_loopback_is_out_of_reach(
    probes: dict[str, Any],
) -> None:
    assert probes["frontend"].startswith("refused"), probes
    assert probes["frontend_through_gateway"].startswith("refused"), probes


def test_overnights_venv_and_its_temporal_cli_are_not_in_the_sandbox(
    probes: dict[str, Any],
) -> None:
    assert probes["temporal_cli"] is None and probes["venv_seen"] is False, probes


def test_a_declared_host_port_is_reachable(probes: dict[str, Any]) -> None:
    assert probes["declared_port"] == "reached", probes


def test_an_address_outside_the_host_is_reached_neither_directly_nor_through_the_gateway(
    probes: dict[str, Any],
) -> None:
    """The test host is on a private network: no route leads there, and the gateway refuses
    it (off the run's allow-list, and a private address besides), at once."""
    assert probes["outside"] == "refused: Network is unreachable", probes
    assert probes["outside_through_gateway"].startswith("refused: 403"), probes


def test_the_gateway_does_not_lead_to_the_workers_loopback(probes: dict[str, Any]) -> None:
    assert probes["frontend_by_gateway"].startswith("refused: 403"), probes


@pytest.mark.skipif(not ROOT, reason="the root case: a worker running as root")
def test_an_agent_of_a_root_worker_is_not_root_and_cannot_write_kernel_settings(
    probes: dict[str, Any],
) -> None:
    assert probes["uid"] != 0
    assert probes["proc_sys"].startswith("refused"), probes
    assert probes["sysrq"].startswith("refused"), probes


@pytest.mark.skipif(not ROOT, reason="the root case: a worker running as root")
def test_files_only_root_may_read_stay_unread(probes: dict[str, Any]) -> None:
    assert probes["shadow"].startswith("refused"), probes
    assert probes["root_home"] in ([], [".pyenv"]) or str(probes["root_home"]).startswith(
        "refused"
    ), probes


def test_no_home_folder_host_socket_or_overnight_state_is_visible(
    probes: dict[str, Any],
) -> None:
    assert probes["homes"] == ["sandbox"], probes
    assert probes["host_socket_seen"] is False and probes["state_seen"] is False, probes
    assert probes["run"] == ["overnight"], probes  # the shim's own folder, nothing of the host


@pytest.mark.skipif(not ROOT, reason="processes are capped per sandbox user (a root worker)")
def test_the_number_of_processes_is_capped(probes: dict[str, Any]) -> None:
    assert 0 < probes["forks"] < PROCESS_CAP, probes
