"""workflows.pure.hosts: where a step goes, and when a host is lost (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from activities.models.host import HostSeen
from tests.workflows.harness import make_spec
from tests.workflows.pure.fields import put
from workflows.pure import hosts
from workflows.pure.state import SupervisorState

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _state(**changes: object) -> SupervisorState:
    spec = make_spec()
    s = SupervisorState(spec=spec, budget=spec.budget, started_at=NOW)
    return put(s, **changes)


def _seen(last_poll_at: datetime | None, lost_after: float = 180) -> HostSeen:
    return HostSeen(
        host_queue="overnight@a",
        last_poll_at=last_poll_at,
        lost_after_seconds=lost_after,
        checked_at=NOW,
    )


def test_a_run_begun_before_host_queues_sends_every_step_to_its_own_queue() -> None:
    s = _state(sandbox_id="box-1", sandbox_hosts={"box-1": "overnight@a"})
    assert hosts.route_for(s, "box-1") == hosts.ANY_WORKER


def test_a_known_sandbox_goes_to_its_host_waiting_a_third_of_the_threshold() -> None:
    s = _state(host_routing=True, sandbox_hosts={"box-1": "overnight@a"}, host_lost_seconds=90)
    route = hosts.route_for(s, "box-1")
    assert (route.task_queue, route.schedule_to_start) == ("overnight@a", timedelta(seconds=30))
    assert hosts.route_for(s, "box-2") == hosts.ANY_WORKER  # a Runtime sandbox: any worker
    assert hosts.shown_host(s, "box-1") == "a"


def test_the_wait_is_bounded_and_a_lost_host_is_not_sent_to() -> None:
    s = _state(host_routing=True, sandbox_hosts={"b": "q@a"}, lost_hosts=["q@a"])
    assert hosts.host_wait(s) == timedelta(seconds=60)  # default 180 s / 3
    assert hosts.route_for(s, "b").lost
    assert hosts.live_host_queues(s) == []
    s.hosts.host_lost_seconds = 5
    assert hosts.host_wait(s) == hosts.HOST_WAIT_MIN


def test_a_host_is_lost_only_once_no_poller_has_polled_for_its_threshold() -> None:
    waiting_since = NOW - timedelta(seconds=60)
    # The server's last poll says since when (a SIGKILLed worker's entry stays a few minutes).
    assert hosts.is_lost(_seen(NOW - timedelta(seconds=180)), waiting_since, NOW)
    assert not hosts.is_lost(_seen(NOW - timedelta(seconds=179)), waiting_since, NOW)
    # No poller listed (a graceful shutdown removes its entry): counted from the run's wait.
    assert not hosts.is_lost(_seen(None), waiting_since, NOW)
    assert hosts.is_lost(_seen(None), NOW - timedelta(seconds=180), NOW)
    reason = hosts.lost_reason("overnight@a", _seen(NOW - timedelta(seconds=200)), NOW)
    assert reason.startswith("host lost: a") and "200 s ago" in reason


def test_a_lost_hosts_reason_says_its_queue_its_threshold_and_what_the_server_listed() -> None:
    assert hosts.lost_reason("overnight@a", _seen(None, lost_after=90), NOW) == (
        "host lost: a's queue overnight@a had no worker for 90 s (no poller listed)"
    )
    assert hosts.lost_reason_again("overnight@a") == (
        "host lost: a (its queue overnight@a was taken as lost before)"
    )


def test_the_live_hosts_are_those_the_run_made_sandboxes_on_once_each_but_the_lost() -> None:
    made = {"b1": "q@a", "b2": "q@b", "b3": "q@a", "b4": "q@c", "b5": "q@b"}
    s = _state(host_routing=True, sandbox_hosts=made, lost_hosts=["q@c"])
    assert hosts.live_host_queues(s) == ["q@a", "q@b"]


def test_a_pinned_create_goes_to_the_first_allowed_host_not_lost() -> None:
    s = _state(host_routing=True, spec=make_spec(hosts=["a", "b"]))
    assert hosts.create_queue(s, "q") == "q@a"
    s.hosts.lost_hosts = ["q@a"]
    assert hosts.create_queue(s, "q") == "q@b"
    s.hosts.lost_hosts = ["q@a", "q@b"]
    assert hosts.create_queue(s, "q") == "q@a"  # all lost: the first may be back
    assert hosts.create_queue(_state(host_routing=True), "q") is None  # not pinned: any host


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"hosts": ["a", "a"]}, "listed twice"),
        ({"hosts": ["-a"]}, "not a host name"),
        ({"hosts": ["a b"]}, "not a host name"),
        ({"hosts": ["a"], "provider": "runtime"}, "belong to no host"),
    ],
)
def test_a_spec_names_its_hosts_once_each_and_only_for_local_sandboxes(
    changes: dict[str, object], why: str
) -> None:
    with pytest.raises(ValidationError, match=why):
        make_spec(**changes)
