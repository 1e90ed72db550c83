"""A Runtime API storm on the loopback fake: random 503s, 529 overloads and slow answers."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from fakes.runtime import FakeRuntime, Fault


@dataclass
class RandomFault(Fault):
    """A fault that takes each matching request only with `probability`."""

    probability: float = 1.0
    rng: random.Random = field(default_factory=random.Random)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def matches(self, method: str, path: str) -> bool:
        with self.lock:
            hit = self.rng.random() < self.probability
        return hit and super().matches(method, path)


@dataclass
class Storm:
    """The faults of one storm, kept so their counts survive the storm's end."""

    unavailable: RandomFault
    overloaded: RandomFault
    slow: RandomFault

    @property
    def counts(self) -> dict[str, int]:
        return {
            "503 unavailable": self.unavailable.fired,
            "529 overloaded": self.overloaded.fired,
            "slow answer (3 s)": self.slow.fired,
        }


def start_storm(fake: FakeRuntime, seed: int) -> Storm:
    """Fail about a third of all requests (503 or 529) and slow a third of the rest."""
    rng = random.Random(seed)
    storm = Storm(
        unavailable=RandomFault(
            "status",
            times=None,
            status=503,
            code="host_unavailable",
            retry_after=1.0,
            probability=0.2,
            rng=rng,
        ),
        overloaded=RandomFault(
            "status", times=None, status=529, code="overloaded", probability=0.15, rng=rng
        ),
        slow=RandomFault("slow", times=None, delay=3.0, probability=0.3, rng=rng),
    )
    for fault in (storm.unavailable, storm.overloaded, storm.slow):
        fake.faults.add(fault)
    return storm


def end_storm(fake: FakeRuntime) -> None:
    fake.faults.clear()
