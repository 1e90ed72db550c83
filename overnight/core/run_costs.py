"""What a run's safety net cost: the sandbox time each restart took (making, filling and starting
the new sandbox) and the work it threw away (done since the last checkpoint, so redone), priced
at the run's `rates`. Plain data that crosses the wire in `RunStatus` and `RunResult`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from overnight.core.model_base import _Strict

# Why a restart happened, in a few words a report can count
# (`cause_of` in workflows.pure.safety_net).
RestartCause = Literal[
    "crashed",
    "looped",
    "stalled",
    "sandbox_failed",
    "time_limit",
    "fresh_starts_used_up",
    "resumed",
    "other",
]


class RestartCost(_Strict):
    """One restart: the attempt it began, why, and the sandbox time it cost."""

    attempt: int
    reason: str
    cause: RestartCause
    # Sandbox time since the agent's last saved progress (its last checkpoint, or its start)
    # up to the failure being noticed: work thrown away, to be done again.
    lost_seconds: float
    # From the failure being noticed to the new agent running (setting the old sandbox aside,
    # making, cloning and starting the new one), less any time spent waiting for a person.
    setup_seconds: float
    usd: float


class SafetyNet(_Strict):
    """The sum of a run's restarts' costs, and its share of what the run's sandboxes cost."""

    restarts: int = 0
    lost_seconds: float = 0
    setup_seconds: float = 0
    usd: float = 0
    # What the run's sandboxes cost so far (the spend budget's sandbox figure), and the safety
    # net's part of it (None while that is 0).
    sandbox_usd: float = 0
    share: float | None = None
    # Restarts by cause, and the most recent restarts' own figures (at most `RECENT_COSTS`).
    by_cause: dict[str, int] = Field(default_factory=dict)
    recent: list[RestartCost] = Field(default_factory=list)
