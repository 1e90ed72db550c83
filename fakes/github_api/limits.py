"""The fake GitHub's limits and scripted failures.

- The primary rate limit: `limit` requests per window (an hour on github.com); every answered
  request counts but a `304 Not Modified` (GitHub says conditional requests answered from the
  cache cost nothing); at 0 left, every request gets `403` with `x-ratelimit-remaining: 0`
  and `x-ratelimit-reset` (UTC epoch seconds) until the window ends.
- Scripted failures (`Fault`), for one route or any: a secondary rate limit (`403`, or `429`,
  with `retry-after` when given, and a message that says so), a server error (`5xx`), or a
  dropped connection; `after=True` does the request's work first and then fails the answer
  (a create whose `201` is lost, so a client tries it again); or a `403` that is no rate limit
  ("forbidden": the token lacks a permission), which no client should try again.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

FaultKind = Literal["secondary", "server", "drop", "forbidden"]
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)
PRIMARY_MESSAGE = "API rate limit exceeded for user ID 1."
FORBIDDEN_MESSAGE = "Resource not accessible by integration"


@dataclass
class Fault:
    kind: FaultKind
    # The route's name (fakes.github_api.routes.ROUTES), or None for any request.
    route: str | None = None
    times: int = 1
    status: int = 0  # default: 403 for "secondary", 502 for "server"
    retry_after: int | None = None  # whole seconds, as GitHub sends them
    after: bool = False

    def answer_status(self) -> int:
        if self.status:
            return self.status
        return 403 if self.kind == "secondary" else 502


@dataclass(frozen=True)
class Verdict:
    """What the book says of a request before it is served."""

    fault: Fault | None = None
    exhausted: bool = False


class RateBook:
    """The primary limit's count and the scripted faults, shared by the server's threads."""

    def __init__(self, limit: int, window_seconds: float, clock: Callable[[], float]) -> None:
        self.limit = limit
        self.window_seconds = window_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._used = 0
        self._reset_at = clock() + window_seconds
        self._faults: list[Fault] = []

    def script(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def exhaust(self, reset_in_seconds: float) -> None:
        """No requests left until `reset_in_seconds` from now."""
        with self._lock:
            self._used = self.limit
            self._reset_at = self._clock() + reset_in_seconds

    def judge(self, route: str) -> Verdict:
        with self._lock:
            self._roll()
            if self._used >= self.limit:
                return Verdict(exhausted=True)
            for fault in self._faults:
                if fault.times > 0 and fault.route in (None, route):
                    fault.times -= 1
                    return Verdict(fault=fault)
            return Verdict()

    def charge(self) -> None:
        with self._lock:
            self._roll()
            self._used = min(self.limit, self._used + 1)

    def headers(self) -> dict[str, str]:
        with self._lock:
            self._roll()
            return {
                "x-ratelimit-limit": str(self.limit),
                "x-ratelimit-remaining": str(self.limit - self._used),
                "x-ratelimit-used": str(self._used),
                "x-ratelimit-reset": str(math.ceil(self._reset_at)),
                "x-ratelimit-resource": "core",
            }

    def faults_left(self) -> int:
        with self._lock:
            return sum(f.times for f in self._faults)

    def _roll(self) -> None:
        if self._clock() >= self._reset_at:
            self._used = 0
            self._reset_at = self._clock() + self.window_seconds


def fault_answer(fault: Fault) -> tuple[int, dict[str, str], dict[str, Any]]:
    """The status, extra headers and JSON body of a scripted failure (not "drop")."""
    status = fault.answer_status()
    if fault.kind == "secondary":
        headers = {}
        if fault.retry_after is not None:
            headers["retry-after"] = str(fault.retry_after)
        body = {
            "message": SECONDARY_MESSAGE,
            "documentation_url": "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api",
        }
        return status, headers, body
    if fault.kind == "forbidden":
        return 403, {}, {"message": FORBIDDEN_MESSAGE}
    return status, {}, {"message": "Server Error" if status == 500 else "Bad Gateway"}
