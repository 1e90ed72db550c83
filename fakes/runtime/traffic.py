"""What the fake's requests cost: the per-key rate limit, and counts of requests and bytes.

The limit is Runtime's: a token bucket (`rate_per_second`, bursts of `burst`) and at most
`max_in_flight` requests served at once (a held stream or long poll counts until it ends). A
request over the limit waits its turn up to `max_queue_seconds`, then is answered 429
`rate_limited` with `Retry-After`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from fakes.runtime.rules import Rules

# The wait named to a request refused because every slot was held (no token was missing).
_SLOTS_RETRY_SECONDS = 0.25


@dataclass
class Served:
    """One request as the counters see it. `status` is 0 and `done` False until answered;
    `bytes_sent` counts the response body (a stream's pieces as they go)."""

    method: str
    path: str
    route: str
    sandbox_id: str | None
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    bytes_sent: int = 0
    done: bool = False
    bytes_received: int = 0  # the request's body


class Traffic:
    """Counts of what the fake served; thread-safe, read by tests from their own thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.served: list[Served] = []

    def received(self, served: Served) -> Served:
        with self.lock:
            self.served.append(served)
        return served

    def snapshot(self) -> list[Served]:
        with self.lock:
            return list(self.served)

    def count(
        self, sandbox_id: str | None = None, route: str | None = None, status: int | None = None
    ) -> int:
        return len(self.matching(sandbox_id, route, status))

    def bytes_sent(self, route: str | None = None, sandbox_id: str | None = None) -> int:
        return sum(s.bytes_sent for s in self.matching(sandbox_id, route, None))

    def bytes_received(self, route: str | None = None, sandbox_id: str | None = None) -> int:
        return sum(s.bytes_received for s in self.matching(sandbox_id, route, None))

    def by_route(self, sandbox_id: str | None = None) -> dict[str, int]:
        return dict(Counter(s.route for s in self.matching(sandbox_id, None, None)))

    def matching(
        self, sandbox_id: str | None, route: str | None, status: int | None
    ) -> list[Served]:
        return [
            s
            for s in self.snapshot()
            if (sandbox_id is None or s.sandbox_id == sandbox_id)
            and (route is None or s.route == route)
            and (status is None or s.status == status)
        ]


class RateLimiter:
    """One key's token bucket and in-flight count, in the fake's event loop."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.tokens = float(rules.burst)
        self.updated = time.monotonic()
        self.in_flight = 0

    def _refill(self) -> None:
        now = time.monotonic()
        rate, burst = self.rules.rate_per_second, float(self.rules.burst)
        self.tokens = min(burst, self.tokens + (now - self.updated) * rate)
        self.updated = now

    def _admissible(self) -> bool:
        return self.tokens >= 1 and self.in_flight < self.rules.max_in_flight

    async def acquire(self) -> float | None:
        """Take a token and a slot: None once admitted, or the seconds to name in a 429."""
        give_up = time.monotonic() + self.rules.max_queue_seconds
        while True:
            self._refill()
            if self._admissible():
                self.tokens -= 1
                self.in_flight += 1
                return None
            left = give_up - time.monotonic()
            if left <= 0:
                return self._retry_after()
            # Wake when the next token is due (slots free at unknown times: look often).
            token_due = max(0.0, (1 - self.tokens) / self.rules.rate_per_second)
            await asyncio.sleep(min(left, max(token_due, 0.005), 0.05))

    def admit_unlimited(self) -> None:
        """Count a request the limit is switched off for, so releasing it stays balanced."""
        self.in_flight += 1

    def release(self) -> None:
        self.in_flight -= 1

    def _retry_after(self) -> float:
        if self.tokens < 1:
            return max(0.01, (1 - self.tokens) / self.rules.rate_per_second)
        return _SLOTS_RETRY_SECONDS


def seconds_header(seconds: float) -> str:
    """A `Retry-After` value: seconds, fractional when short ("0.02", "1.5", "3")."""
    return f"{seconds:.3f}".rstrip("0").rstrip(".") or "0"


class Tracked:
    """A response stream that counts its pieces and calls `done` exactly once when it ends,
    however it ends: read to the end, failed, or closed (even before its first piece, when an
    async generator's own `finally` would never run)."""

    def __init__(
        self,
        inner: AsyncIterator[bytes],
        on_piece: Callable[[bytes], None],
        done: Callable[[], None],
    ) -> None:
        self._inner, self._on_piece, self._done = inner, on_piece, done
        self._finished = False

    def __aiter__(self) -> Tracked:
        return self

    async def __anext__(self) -> bytes:
        try:
            piece = await self._inner.__anext__()
        except BaseException:
            self._finish()
            raise
        self._on_piece(piece)
        return piece

    async def aclose(self) -> None:
        try:
            close = getattr(self._inner, "aclose", None)
            if close is not None:
                await close()
        finally:
            self._finish()

    def _finish(self) -> None:
        if not self._finished:
            self._finished = True
            self._done()
