"""A home's gateway port stays the home's while no gateway of it listens (activities/gateway/
ports.py): the relays of its running sandboxes dial that port and no other, so a gateway that
must move after a restart cuts every one of them off (their model calls, git and egress).

Found with the end-to-end test of a worker SIGKILLed mid-stream
(tests/e2e/test_gateway_worker_killed.py): a gateway made to move there left Claude Code's
calls unanswered for good (400 s, the run still in its first attempt, nothing more reaching
the model). Before, a home's first port was the kernel's choice, from the range it also gives
outgoing connections their source ports from: while every worker of the home was away, any
connection of the machine could take it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.gateway.ports import SPREAD, ephemeral_low, home_ports
from activities.gateway.service import Gateway, listen_for_home, port_of


@pytest.fixture
def gateways() -> Iterator[list[Gateway]]:
    started: list[Gateway] = []
    yield started
    for gateway in started:
        gateway.stop()


def started(gateways: list[Gateway], home: Path) -> int:
    gateway = Gateway(home)
    gateways.append(gateway)
    return gateway.start()


def test_a_homes_first_gateway_listens_below_the_ports_outgoing_connections_are_given(
    tmp_path: Path, gateways: list[Gateway]
) -> None:
    ports = {started(gateways, tmp_path / f"home-{n}") for n in range(3)}
    low = ephemeral_low()
    assert all(low - SPREAD <= port < low for port in ports), (ports, low)
    assert len(ports) == 3  # each home its own


def test_a_port_an_outgoing_connection_took_while_no_gateway_listened_moves_it_below_the_range(
    tmp_path: Path, gateways: list[Gateway]
) -> None:
    """A home kept from before, its port of the ephemeral range: while its workers were away,
    an outgoing connection was given that port, so the next gateway cannot listen there."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        with socket.create_connection(server.getsockname()) as outgoing:
            taken = outgoing.getsockname()[1]
            assert taken >= ephemeral_low()
            (tmp_path / "gateway").mkdir()
            (tmp_path / "gateway" / "port").write_text(f"{taken}\n")
            port = started(gateways, tmp_path)
    assert port != taken and port < ephemeral_low()
    assert port_of(tmp_path) == port  # where the home's next sandboxes are sent


def test_the_home_keeps_its_port_across_restarts(tmp_path: Path, gateways: list[Gateway]) -> None:
    first = Gateway(tmp_path)
    port = first.start()
    first.stop()
    assert started(gateways, tmp_path) == port


def test_a_drawn_port_another_homes_gateway_listens_on_is_not_joined(
    tmp_path: Path, gateways: list[Gateway]
) -> None:
    """Gateways of one user may share a port (`SO_REUSEPORT`): a draw that met another home's
    would split that home's sandboxes' connections between two homes' gateways."""
    other = started(gateways, tmp_path / "other")
    with listen_for_home(None, drawn=[other]) as listening:
        assert listening.getsockname()[1] != other


def test_ports_are_drawn_below_the_range_and_none_when_there_is_no_room() -> None:
    assert all(32768 - SPREAD <= port < 32768 for port in home_ports(32768))
    assert home_ports(1024) == []
