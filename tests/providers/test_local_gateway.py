"""A local sandbox's network behind the gateway, on real bubblewrap sandboxes and a real
gateway: no route out but the gateway's port; the gateway connects only to names on the
allow-list, only at public addresses (or ones the worker names), and counts what it refuses.

The outside addresses are this machine's own: a tap interface the test makes carries the
cloud metadata address, a private-range address and a public-looking one, each with a
listener; nothing here reaches another host."""

from __future__ import annotations

import contextlib
import http.server
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.gateway.resolve import Resolver
from activities.gateway.service import Gateway, refusals_of, sandbox_env
from activities.providers.local.engine import LocalEngine
from overnight.core.addresses import is_forbidden
from overnight.core.egress import parse_address_rules

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or shutil.which("curl") is None,
    reason="needs bubblewrap and curl",
)

METADATA = "169.254.169.254"
PRIVATE = "10.213.77.1"


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        body = f"hello from {self.server.server_address[0]}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serving(address: str) -> Iterator[int]:
    server = http.server.ThreadingHTTPServer((address, 0), Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def own_address() -> str | None:
    """This machine's first non-loopback IPv4 address, if it has one."""
    done = subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True, text=True)
    for link in json.loads(done.stdout or "[]"):
        for info in link.get("addr_info", []):
            if not ipaddress.ip_address(info["local"]).is_loopback:
                return str(info["local"])
    return None


@pytest.fixture(scope="module")
def tap_addresses() -> Iterator[list[str]]:
    """The metadata address and a private one on a tap interface of this machine (root)."""
    if shutil.which("ip") is None:
        pytest.skip("needs iproute2")
    name = f"ovt{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "tuntap", "add", "dev", name, "mode", "tap"], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make a tap interface: {made.stderr.decode().strip()}")
    try:
        for address in (METADATA, PRIVATE):
            subprocess.run(["ip", "addr", "add", f"{address}/32", "dev", name], check=True)
        subprocess.run(["ip", "link", "set", name, "up"], check=True)
        yield [METADATA, PRIVATE]
    finally:
        subprocess.run(["ip", "link", "del", name], capture_output=True)


@pytest.fixture
def hosts_file(tmp_path: Path) -> Path:
    path = tmp_path / "gateway-hosts"
    path.write_text(f"127.0.0.1 allowed.test\n{METADATA} rebound.test\n127.0.0.1 other.test\n")
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def gateway(home: Path, hosts_file: Path) -> Iterator[Gateway]:
    # The worker names the loopback test server as reachable, as a company names its mirror.
    served = Gateway(
        home,
        resolver=Resolver(str(hosts_file)),
        address_rules=parse_address_rules("127.0.0.1"),
    )
    served.start()
    yield served
    served.stop()


@pytest.fixture
def engine(home: Path, gateway: Gateway) -> Iterator[LocalEngine]:
    engine = LocalEngine(home)
    yield engine
    for meta in engine.list_sandboxes():
        engine.stop(meta.id)


def sandbox(engine: LocalEngine, egress: list[str]) -> str:
    name = f"gw-{uuid.uuid4().hex[:8]}"
    engine.get_or_create(name, timeout_seconds=120, egress=egress)
    return name


def run(engine: LocalEngine, sid: str, command: str) -> tuple[int, str]:
    done = engine.run(sid, command, timeout_seconds=60)
    return done.exit_code, done.stdout + done.stderr


def test_an_allowed_name_reaches_its_server_through_the_gateway(engine: LocalEngine) -> None:
    with serving("127.0.0.1") as port:
        sid = sandbox(engine, ["allowed.test"])
        code, said = run(engine, sid, f"curl -sS --max-time 20 http://allowed.test:{port}/")
        assert (code, said) == (0, "hello from 127.0.0.1")
        # CONNECT, as TLS goes (a tunnel to the same plain server).
        tunnel = f"curl -sS --max-time 20 --proxytunnel http://allowed.test:{port}/"
        assert run(engine, sid, tunnel) == (0, "hello from 127.0.0.1")
        assert refusals_of(engine.home, sid) == {}


def test_a_name_off_the_allow_list_is_refused_at_once_and_counted(
    engine: LocalEngine, gateway: Gateway
) -> None:
    with serving("127.0.0.1") as port:
        sid = sandbox(engine, ["allowed.test"])
        for _ in range(3):
            code, said = run(engine, sid, f"curl -sS --max-time 20 http://other.test:{port}/")
            assert "other.test is not on this run's allow-list" in said
        code, said = run(engine, sid, f"curl -sS --proxytunnel http://other.test:{port}/")
        assert code != 0 and "403" in said
    gateway.book.flush()
    assert refusals_of(engine.home, sid) == {"other.test": 4}


def test_a_name_made_to_resolve_to_the_metadata_address_is_refused(
    engine: LocalEngine, gateway: Gateway, tap_addresses: list[str]
) -> None:
    with serving(METADATA) as port:
        sid = sandbox(engine, ["rebound.test"])
        code, said = run(engine, sid, f"curl -sS --max-time 20 http://rebound.test:{port}/")
        assert "rebound.test leads to" in said and METADATA in said, said
        assert "hello" not in said
        # Literal addresses are held to the same rule (and are on no allow-list).
        literal = f"curl -sS --max-time 20 http://{METADATA}:{port}/"
        assert "hello" not in run(engine, sid, literal)[1]
    gateway.book.flush()
    assert refusals_of(engine.home, sid) == {"rebound.test": 1, METADATA: 1}


def test_no_route_leads_anywhere_but_the_gateway(
    engine: LocalEngine, tap_addresses: list[str]
) -> None:
    """Listeners on the metadata address, a private address and the machine's own address:
    a tool that ignores the proxy fails at once, in its own words, and reaches none."""
    addresses = [*tap_addresses, *[a for a in [own_address()] if a]]
    with contextlib.ExitStack() as stack:
        ports = {a: stack.enter_context(serving(a)) for a in addresses}
        sid = sandbox(engine, ["*"])
        for address, port in ports.items():
            code, said = run(
                engine, sid, f"curl -sS --noproxy '*' --max-time 20 http://{address}:{port}/"
            )
            # curl's 7: could not connect (no route: refused by the kernel, not timed out).
            assert code == 7 and "hello" not in said, (address, said)
            if is_forbidden(address) is None:
                continue  # a machine with a public address of its own: the gateway may go there
            # Through the gateway, with every public name allowed: refused by address.
            code, said = run(engine, sid, f"curl -sS --max-time 20 http://{address}:{port}/")
            assert "hello" not in said and "no sandbox may reach" in said, (address, said)


def test_a_token_of_no_running_sandbox_is_refused(engine: LocalEngine, gateway: Gateway) -> None:
    assert gateway.port is not None
    with serving("127.0.0.1") as port:
        sid = sandbox(engine, ["allowed.test"])
        good = sandbox_env(engine.home, sid, gateway.port)["HTTP_PROXY"]
        forged = good.replace(sid, "gw-forged00")
        url = f"http://allowed.test:{port}/"
        for proxy in (f"http://127.0.0.1:{gateway.port}", forged):
            done = subprocess.run(
                ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-x", proxy, url],
                capture_output=True,
                text=True,
            )
            assert done.stdout == "407", (proxy, done.stdout, done.stderr)
        assert _status(good, url) == "200"
        engine.stop(sid)
        assert _status(good, url) == "407"


def _status(proxy: str, url: str) -> str:
    done = subprocess.run(
        ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-x", proxy, url],
        capture_output=True,
        text=True,
    )
    return done.stdout


def test_a_sandbox_reaches_nothing_on_the_workers_loopback_but_the_gateway(
    engine: LocalEngine, gateway: Gateway
) -> None:
    with serving("127.0.0.1") as port:
        sid = sandbox(engine, ["*"])
        code, said = run(engine, sid, f"curl -sS --noproxy '*' http://127.0.0.1:{port}/")
        assert code != 0 and "hello" not in said
        probe = socket.create_connection(("127.0.0.1", gateway.port or 0))
        probe.close()


async def test_a_sandboxs_token_is_redacted_from_the_checkpoint_the_run_keeps(
    engine: LocalEngine, gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    from activities.providers.local.provider import LocalProvider
    from activities.sandbox_base.checkpoints import read_checkpoint

    monkeypatch.setenv("OVERNIGHT_HOME", str(engine.home))
    assert gateway.port is not None
    sid = sandbox(engine, ["allowed.test"])
    token = gateway_token_of(engine, sid, gateway.port)
    code, _ = run(engine, sid, 'printf "%s" "$HTTP_PROXY" > /workspace/checkpoint.json')
    assert code == 0
    read = await read_checkpoint(
        LocalProvider(engine), sid, "/workspace/checkpoint.json", 4096, None
    )
    assert read.text is not None and token not in read.text
    assert f"sandbox-{sid}:" in read.text  # the rest of what it wrote is kept


def gateway_token_of(engine: LocalEngine, sid: str, port: int) -> str:
    url = sandbox_env(engine.home, sid, port)["HTTP_PROXY"]
    return url.split(":", 2)[2].split("@", 1)[0]


def test_a_second_gateway_of_the_home_shares_the_port_and_serves_when_the_first_stops(
    engine: LocalEngine, gateway: Gateway, hosts_file: Path
) -> None:
    """Two workers of one home (a deploy's old and new, or a test's two): one port, and the
    sandboxes keep their way out when either stops; their refusals add up."""
    second = Gateway(
        engine.home,
        resolver=Resolver(str(hosts_file)),
        address_rules=parse_address_rules("127.0.0.1"),
    )
    assert second.start() == gateway.port
    with serving("127.0.0.1") as port:
        sid = sandbox(engine, ["allowed.test"])
        refused = f"curl -sS --max-time 20 http://other.test:{port}/"
        for _ in range(4):  # the kernel hands them to either gateway
            assert "not on this run's allow-list" in run(engine, sid, refused)[1]
        gateway.stop()
        asked = f"curl -sS --max-time 20 http://allowed.test:{port}/"
        assert run(engine, sid, asked) == (0, "hello from 127.0.0.1")
        assert "not on this run's allow-list" in run(engine, sid, refused)[1]
    second.stop()
    assert refusals_of(engine.home, sid) == {"other.test": 5}


def test_a_sandboxs_relay_ends_when_its_launcher_is_killed(engine: LocalEngine) -> None:
    """The relay to the gateway runs as the sandbox's user, and a change of user clears the
    parent-death signal: relays of killed launchers were seen living on for good."""
    sid = sandbox(engine, ["allowed.test"])
    engine.start_process(sid, f"{sid}-1-0", "sleep 60", cwd="/workspace")
    relay = wait_for_relay(sid)
    os.kill(parent_of(relay), signal.SIGKILL)
    give_up = time.monotonic() + 30
    while alive(relay) and time.monotonic() < give_up:
        time.sleep(0.05)
    assert not alive(relay)


def parent_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("PPid")).split()[1])


def alive(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def wait_for_relay(sid: str) -> int:
    """The relay of `sid`'s agent: a port_relay.py whose parent, the launcher, names it."""
    give_up = time.monotonic() + 30
    while time.monotonic() < give_up:
        for proc in Path("/proc").iterdir():
            try:
                argv = (proc / "cmdline").read_bytes()
                if proc.name.isdigit() and b"port_relay.py" in argv:
                    launcher = Path(f"/proc/{parent_of(int(proc.name))}/cmdline").read_bytes()
                    if sid.encode() in launcher:
                        return int(proc.name)
            except (OSError, StopIteration):
                continue
        time.sleep(0.05)
    raise AssertionError(f"no relay for {sid}")
