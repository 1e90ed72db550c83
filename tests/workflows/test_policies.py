"""How closely a run is watched follows its poll_seconds, within bounds; what it costs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from activities.heartbeat import HEARTBEAT_SHARE
from overnight.worker.runner import HEARTBEAT_THROTTLE
from workflows.policies import OBSERVE_HEARTBEAT_MAX, observe_heartbeat


@pytest.mark.parametrize(
    ("poll_seconds", "expected"),
    [(1, 30), (6, 30), (20, 90), (60, 270), (3600, 270)],
)
def test_observe_heartbeat_timeout_follows_poll_seconds_within_bounds(
    poll_seconds: float, expected: float
) -> None:
    assert observe_heartbeat(poll_seconds) == timedelta(seconds=expected)


def test_default_poll_keeps_heartbeats_near_fifteen_an_hour() -> None:
    # The observe heartbeats once per 0.8 x its timeout; heartbeats are billable actions.
    per_hour = 3600 / (HEARTBEAT_SHARE * observe_heartbeat(60).total_seconds())
    assert per_hour <= 17


def test_a_killed_workers_watch_is_taken_over_within_five_minutes() -> None:
    # A SIGKILLed worker's observe is retried elsewhere once its heartbeat timeout passes.
    for poll_seconds in (1, 60, 3600):
        assert observe_heartbeat(poll_seconds) <= timedelta(minutes=5) - timedelta(seconds=15)


def test_the_sdk_sends_each_observe_heartbeat_when_it_is_made() -> None:
    # The worker's throttle window is at least the observe's heartbeat interval, so the SDK
    # neither holds a heartbeat back nor sends more than the activity makes.
    longest = HEARTBEAT_SHARE * OBSERVE_HEARTBEAT_MAX.total_seconds()
    assert HEARTBEAT_THROTTLE.total_seconds() >= longest
