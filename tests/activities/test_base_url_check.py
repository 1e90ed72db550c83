"""The `base_url` check at a run's start is no port scanner of the worker (issue #47, item 5):
every spelling of the worker's loopback is refused alike before any connection, link-local
and metadata addresses are never tried, and whether something listens is said only of a
port the spec may send its sandbox to. Real sockets on this machine's loopback."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from activities.coding_agent.base_url_check import base_url_problems
from activities.models import SpecCheckInput
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.sandbox.activities import SandboxActivities
from overnight.core.models import RunSpec
from tests.conftest import free_port
from tests.live import granted

# The worker's loopback, as a spec's author may write it.
LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "localhost",
    "127.1",
    "127.0.1",
    "0.0.0.0",
    "0",
    "2130706433",
    "0177.0.0.1",
    "0x7f.0.0.1",
    "0x7f000001",
    "127.255.255.254",
    "[::1]",
    "[::]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[::ffff:0.0.0.0]",
    "[::127.0.0.1]",
]


def agent_spec(base_url: str, **fields: Any) -> RunSpec:
    agent = {"kind": "claude-code", "prompt": "Make the tests pass", "base_url": base_url}
    return RunSpec(
        run_id=f"url-{uuid.uuid4().hex[:8]}",
        repo="https://example.com/app.git",
        agent=agent,
        **fields,
    )


class Listener:
    """A real server on 127.0.0.1 that counts the connections made to it."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.setblocking(False)
        self.port: int = self.socket.getsockname()[1]

    def accepted(self) -> int:
        count = 0
        while True:
            try:
                connection, _ = self.socket.accept()
            except BlockingIOError:
                return count
            connection.close()
            count += 1


@pytest.fixture
def listener() -> Iterator[Listener]:
    made = Listener()
    try:
        yield made
    finally:
        made.socket.close()


def loopback_refusal(where: str, port: int) -> list[str]:
    return [
        f"field agent.base_url: {where} is on the worker's loopback, which a sandbox reaches "
        f"only on the ports in host_ports: add {port} to host_ports"
    ]


def test_every_spelling_of_the_workers_loopback_is_refused_alike_before_any_connection(
    listener: Listener,
) -> None:
    closed = free_port()
    for spelling in LOOPBACK_SPELLINGS:
        host = spelling.strip("[]")
        for port in (listener.port, closed):
            said = base_url_problems(agent_spec(f"http://{spelling}:{port}/v1"))
            # Listening or not, the same words: the answer tells nothing of the port.
            assert said == loopback_refusal(f"{host}:{port}", port), spelling
    assert listener.accepted() == 0  # nothing was tried


def test_a_port_in_host_ports_is_tried_and_whether_it_listens_is_said(
    listener: Listener,
) -> None:
    closed = free_port()
    for spelling in ("127.0.0.1", "127.1", "0.0.0.0", "2130706433"):
        open_spec = agent_spec(f"http://{spelling}:{listener.port}", host_ports=[listener.port])
        assert base_url_problems(open_spec) == [], spelling
        closed_spec = agent_spec(f"http://{spelling}:{closed}", host_ports=[closed])
        [said] = base_url_problems(closed_spec)
        assert said.startswith("field agent.base_url: nothing accepts connections at "), said
    assert listener.accepted() == 4


def test_link_local_and_metadata_addresses_are_refused_and_never_tried() -> None:
    for spelling, why in [
        ("169.254.169.254", "cloud metadata (169.254.169.254)"),
        ("0xa9fea9fe", "cloud metadata (169.254.169.254)"),
        ("[::ffff:169.254.169.254]", "cloud metadata (169.254.169.254 in an IPv6 address, "),
        ("[fd00:ec2::254]", "cloud metadata (fd00:ec2::254)"),
        ("169.254.10.1", "link-local (169.254.10.1)"),
        ("[fe80::1]", "link-local (fe80::1)"),
        ("224.0.0.1", "multicast (224.0.0.1)"),
        ("255.255.255.255", "broadcast (255.255.255.255)"),
    ]:
        for provider in ("local", "runtime"):
            [said] = base_url_problems(agent_spec(f"http://{spelling}:80", provider=provider))
            host = spelling.strip("[]")
            assert said.startswith(f"field agent.base_url: {host}:80 is {why}"), said
            assert said.endswith("which is no model API: fix base_url"), said


def test_a_runtime_spec_learns_nothing_of_the_workers_loopback(listener: Listener) -> None:
    """A Runtime sandbox has no way to the worker's loopback: there such an address is the
    sandbox's own machine, which the worker cannot see, so it tries nothing and says nothing."""
    closed = free_port()
    for spelling in ("127.0.0.1", "0.0.0.0", "127.1", "[::ffff:127.0.0.1]", "localhost"):
        for port in (listener.port, closed):
            spec = agent_spec(f"http://{spelling}:{port}", provider="runtime")
            assert base_url_problems(spec) == [], spelling
    assert listener.accepted() == 0


def test_a_name_the_worker_cannot_resolve_is_said_before_any_connection() -> None:
    [said] = base_url_problems(agent_spec("http://no-such-host.invalid:8080/v1"))
    assert said.startswith("field agent.base_url: no-such-host.invalid is not found from this ")


def test_a_public_model_api_is_tried_at_the_address_judged_not_the_name_again() -> None:
    """A name is resolved once: the address judged is the one connected to (a name that
    resolves to a public address, then to the loopback, reaches no loopback)."""
    tried: list[tuple[str, int]] = []

    def connect(address: tuple[str, int], timeout: float) -> socket.socket:
        tried.append(address)
        raise ConnectionRefusedError(111, "Connection refused")

    def public(host: str, port: int) -> list[Any]:
        return [IPv4Address("93.184.215.14")]

    spec = agent_spec("https://llm.example.com/anthropic")
    assert base_url_problems(spec, connect, public) == [
        "field agent.base_url: nothing accepts connections at llm.example.com:443 from this "
        "worker (Connection refused): start the model API or gateway there, or fix base_url"
    ]
    assert tried == [("93.184.215.14", 443)]
    assert base_url_problems(agent_spec(""), connect, public) == []  # the vendor's API


async def test_a_spec_refused_for_anything_else_is_not_tried(tmp_path: Path) -> None:
    """What the worker refuses (a host port that is overnight's own, a secret it does not
    allow, ...) is said; the base_url on it is not tried and its answer not given."""
    closed = free_port()
    spec = agent_spec(f"http://127.0.0.1:{closed}", host_ports=[closed], secret_env=["NOT_ALLOWED"])
    async with SandboxActivities(
        providers={"local": LocalProvider(LocalEngine(tmp_path / "home"))}, grants=granted()
    ) as acts:
        checked = await ActivityEnvironment().run(acts.check_spec, SpecCheckInput(spec=spec))
    assert checked.refusals and not any("agent.base_url" in line for line in checked.refusals)
    alone = agent_spec(f"http://127.0.0.1:{closed}", host_ports=[closed])
    assert "nothing accepts connections" in base_url_problems(alone)[0]
