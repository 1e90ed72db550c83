"""How many wrong tokens the console takes before it stops checking them (docs/console.md, "What
protects the pages"). Pure: no I/O, the clock is given, so the tests run on a clock of their own.

A wrong token (on the sign-in form or as `Authorization: Bearer`) is a failure, counted for its
address and for everyone. Within `WINDOW_SECONDS`, a token is refused unchecked until the
counted failures that refuse it leave the window:
- from an address past `PER_ADDRESS` failures (one guesser);
- from an address that has failed at all, once `IN_ALL` failures are counted from everyone
  (many addresses guessing at once: each then has one guess a window);
- from any address once `HELD` failures are counted (a guesser with more addresses than that).
So an address that has not failed is checked until the last bound, and a single guesser
cannot lock people out of signing in: 100 wrong tokens from anywhere refuse only the addresses
that sent them. A right token is never counted.

A right token does not clear an address's failures: a reader holding the read token could
otherwise clear them between guesses at the operator's.

Memory is bounded: only failures within the window are kept, and a failure is counted only
when a token was checked, which no refusal does; so at most `HELD` failures (and addresses)
are held, however many addresses an attacker has.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

WINDOW_SECONDS = 15 * 60.0
# A person who mistypes tries a few times; a guesser tries thousands.
PER_ADDRESS = 10
# Guesses from everyone at once: past this many a window, one guess per address.
IN_ALL = 100
# Failures held at most: past them every token is refused until they age (a botnet's guessing).
HELD = 1000
# IPv6 hands an attacker a /64 (2**64 addresses): one prefix counts as one address.
IPV6_PREFIX = 64


@dataclass(frozen=True)
class Refusal:
    retry_after: int  # whole seconds, at least 1
    # Whose failures refused it: this address's, or everyone's together.
    whose: Literal["address", "everyone"]


class SignInLimiter:
    """The failures of the last window, oldest first, and each address's count of them."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        *,
        per_address: int = PER_ADDRESS,
        in_all: int = IN_ALL,
        held_at_most: int = HELD,
        window: float = WINDOW_SECONDS,
    ) -> None:
        self.clock = clock
        self.per_address = per_address
        self.in_all = in_all
        self.held_at_most = held_at_most
        self.window = window
        self._failures: deque[tuple[float, str]] = deque()
        self._by_address: dict[str, deque[float]] = {}

    def refusal(self, address: str) -> Refusal | None:
        """Whether a token from `address` is refused now, unchecked; None: check it."""
        now = self._expire()
        mine = self._by_address.get(address_key(address))
        if mine is not None and len(mine) >= self.per_address:
            return Refusal(self._wait(mine[0], now), "address")
        if mine is not None and len(self._failures) >= self.in_all:
            # It is checked again once clean (its newest failure gone) or below the ceiling.
            below = self._failures[len(self._failures) - self.in_all][0]
            return Refusal(self._wait(min(mine[-1], below), now), "everyone")
        if len(self._failures) >= self.held_at_most:
            return Refusal(self._wait(self._failures[0][0], now), "everyone")
        return None

    def failed(self, address: str) -> None:
        """A wrong token from `address`. Ask `refusal` first: a failure it would have refused
        (one that should not have been checked) is not kept, so the table never grows past
        `held_at_most`."""
        if self.refusal(address) is not None:
            return
        now = self.clock()
        key = address_key(address)
        self._failures.append((now, key))
        self._by_address.setdefault(key, deque()).append(now)

    @property
    def held(self) -> int:
        """How many addresses are held now (what the bound on memory is about)."""
        self._expire()
        return len(self._by_address)

    def _expire(self) -> float:
        now = self.clock()
        while self._failures and self._failures[0][0] <= now - self.window:
            _, key = self._failures.popleft()
            mine = self._by_address[key]
            mine.popleft()
            if not mine:
                del self._by_address[key]
        return now

    def _wait(self, oldest: float, now: float) -> int:
        return max(1, math.ceil(oldest + self.window - now))


def address_key(host: str) -> str:
    """What one address is for counting: the IPv4 address (an IPv4-mapped IPv6 one as IPv4),
    an IPv6 address's /64, or the text itself when it is no IP address."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:100]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/{IPV6_PREFIX}", strict=False))
    return str(address)
