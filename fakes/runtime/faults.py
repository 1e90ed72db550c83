"""Fault injection for the fake Runtime API: what a flaky network and a busy API do."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

FaultAction = Literal["status", "drop", "slow", "hang", "lose"]


@dataclass
class Fault:
    """One injected misbehaviour, applied to the next `times` requests matching `route`.

    `route` is a regular expression searched in `"METHOD /path"` (empty matches all);
    `times=None` keeps the fault until it is cleared.
    """

    action: FaultAction
    route: str = ""
    times: int | None = 1
    status: int = 503
    code: str = "host_unavailable"
    retry_after: float | None = None
    delay: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    fired: int = 0

    def matches(self, method: str, path: str) -> bool:
        return re.search(self.route, f"{method} {path}") is not None


class Faults:
    """Thread-safe: tests arm faults from their thread while the server runs in its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._silent: set[str] = set()

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()
            self._silent.clear()

    def take(self, method: str, path: str) -> Fault | None:
        """The first armed fault for this request, counted as fired."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.fired += 1
                    if fault.times is not None and fault.fired >= fault.times:
                        self._faults.remove(fault)
                    return fault
        return None

    def silence(self, sandbox_id: str, silent: bool = True) -> None:
        with self._lock:
            (self._silent.add if silent else self._silent.discard)(sandbox_id)

    def is_silent(self, sandbox_id: str | None) -> bool:
        with self._lock:
            return sandbox_id is not None and sandbox_id in self._silent
