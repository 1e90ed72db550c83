"""How closely a run is watched follows its poll_seconds, within bounds."""

from __future__ import annotations

from datetime import timedelta

import pytest

from workflows.policies import observe_heartbeat


@pytest.mark.parametrize(
    ("poll_seconds", "expected"),
    [(1, 30), (12, 30), (20, 50), (60, 150), (3600, 150)],
)
def test_observe_heartbeat_timeout_follows_poll_seconds_within_bounds(
    poll_seconds: float, expected: float
) -> None:
    assert observe_heartbeat(poll_seconds) == timedelta(seconds=expected)


def test_default_poll_keeps_heartbeats_near_thirty_an_hour() -> None:
    # The SDK sends one heartbeat per 0.8 x timeout; heartbeats are billable actions.
    per_hour = 3600 / (0.8 * observe_heartbeat(60).total_seconds())
    assert per_hour <= 30
