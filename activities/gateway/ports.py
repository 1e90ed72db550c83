"""Which ports a home's gateway may take: below the kernel's range for outgoing connections.

A home's gateway port is kept across restarts (`gateway/port`), because the relays of its
running sandboxes dial that port and no other. While no gateway of the home listens (its one
worker restarting, or SIGKILLed), a port of the ephemeral range is free for any outgoing
connection of the machine to take as its source port; the next gateway then cannot listen
there and moves, and every running sandbox loses its way out (its model calls, git and egress
fail until the run restarts it). The kernel never gives an outgoing connection a port below
that range, so a port drawn from there stays the home's while its workers are away.
"""

from __future__ import annotations

import random
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# Linux's default first ephemeral port; below macOS's (49152) too.
DEFAULT_EPHEMERAL_LOW = 32768
# How far below the ephemeral range ports are drawn from (as the tests' free_ports).
SPREAD = 12000
LOWEST = 1024
TRIES = 32


def ephemeral_low(path: Path = EPHEMERAL_RANGE) -> int:
    """The first port the kernel gives outgoing connections."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return DEFAULT_EPHEMERAL_LOW


def home_ports(low: int | None = None, draw: random.Random | None = None) -> list[int]:
    """Ports to try, in order, for a home's gateway that has no port yet (or lost its own):
    random ones below the ephemeral range; empty when there is no room below it."""
    top = ephemeral_low() if low is None else low
    bottom = max(LOWEST, top - SPREAD)
    if top <= bottom:
        return []
    chance = draw or random.SystemRandom()
    return [chance.randrange(bottom, top) for _ in range(TRIES)]
