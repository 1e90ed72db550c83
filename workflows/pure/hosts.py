"""Where a run's steps on a sandbox go, and when its host is taken as lost. Pure.

A local sandbox belongs to the host that made it (overnight.core.hosts): its create goes to the
shared queue (any host may make it), and it answers with its host's queue, where every later
step on it is sent (`route_for`). A step there that no worker starts within `host_wait` comes
back as a schedule-to-start timeout (Temporal retries none of those: the same queue would not
do better); the run then asks the server, on the shared queue, whether the host's queue has a
poller (`check_host`), and takes the host as lost only when none has polled for the host's
`OVERNIGHT_HOST_LOST_SECONDS` (`is_lost`). Until then it asks again every `host_wait`: a worker
restarting (a deploy, a crash) costs the run nothing, since its agent never stopped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from activities.models.host import HostSeen
from overnight.core.hosts import DEFAULT_HOST_LOST_SECONDS, host_of_queue, host_queue
from workflows.pure.state import SupervisorState

# How long a step waits in its host's queue before the run asks whether the host is there: a
# third of the lost threshold (so it is asked about three times before the host is lost),
# within these bounds.
HOST_WAIT_MIN = timedelta(seconds=2)
HOST_WAIT_MAX = timedelta(seconds=60)


@dataclass(frozen=True)
class Route:
    """Where one step on a sandbox goes. The default: the run's own queue, no wait limit."""

    task_queue: str | None = None
    schedule_to_start: timedelta | None = None
    # Its host was taken as lost: the step is not sent at all (it would wait for ever).
    lost: bool = False
    # Asked when the step waited `schedule_to_start` unstarted: is its host lost (True: give
    # up the step), or is it to be sent again (False)? None: give up at once.
    host_lost: Callable[[str], Awaitable[bool]] | None = None


ANY_WORKER = Route()


def route_for(s: SupervisorState, sandbox_id: str | None) -> Route:
    """The route of a step on `sandbox_id` (its host's queue, if the run knows it)."""
    if not s.hosts.host_routing or sandbox_id is None:
        return ANY_WORKER
    queue = s.hosts.sandbox_hosts.get(sandbox_id)
    if queue is None:
        return ANY_WORKER
    return Route(task_queue=queue, schedule_to_start=host_wait(s), lost=queue in s.hosts.lost_hosts)


def create_queue(s: SupervisorState, task_queue: str) -> str | None:
    """The queue a create goes to: None (any worker, any host) unless the spec pins the run to
    hosts; then the first of them the run has not lost, or, all lost, the first again (a lost
    host may be back)."""
    if not s.hosts.host_routing or not s.spec.hosts:
        return None
    queues = [host_queue(task_queue, host) for host in s.spec.hosts]
    live = [queue for queue in queues if queue not in s.hosts.lost_hosts]
    return (live or queues)[0]


def host_wait(s: SupervisorState) -> timedelta:
    lost_after = timedelta(seconds=s.hosts.host_lost_seconds or DEFAULT_HOST_LOST_SECONDS)
    return min(HOST_WAIT_MAX, max(HOST_WAIT_MIN, lost_after / 3))


def live_host_queues(s: SupervisorState) -> list[str]:
    """The queues of the hosts this run made sandboxes on and has not lost, in order."""
    seen: list[str] = []
    for queue in s.hosts.sandbox_hosts.values():
        if queue not in seen and queue not in s.hosts.lost_hosts:
            seen.append(queue)
    return seen


def shown_host(s: SupervisorState, sandbox_id: str | None) -> str | None:
    """The host of the sandbox the status shows (None: not host-bound, or not known)."""
    queue = None if sandbox_id is None else s.hosts.sandbox_hosts.get(sandbox_id)
    return None if queue is None else host_of_queue(queue)


def is_lost(seen: HostSeen, unseen_since: datetime, now: datetime) -> bool:
    """No poller of the host's queue for its lost threshold. The server's latest poll says
    since when; where it lists no poller (a graceful shutdown removes its entry, and entries
    expire after a few minutes), the run counts from when its own step began to wait."""
    last_seen = seen.last_poll_at if seen.last_poll_at is not None else unseen_since
    return (now - last_seen).total_seconds() >= seen.lost_after_seconds


def lost_reason(queue: str, seen: HostSeen, now: datetime) -> str:
    """The restart's reason (its cause: `host lost`)."""
    since = seen.last_poll_at
    how = (
        "no poller listed"
        if since is None
        else f"last poll {int((now - since).total_seconds())} s ago"
    )
    host = host_of_queue(queue)
    return (
        f"host lost: {host}'s queue {queue} had no worker for {seen.lost_after_seconds:g} s ({how})"
    )


def lost_reason_again(queue: str) -> str:
    return f"host lost: {host_of_queue(queue)} (its queue {queue} was taken as lost before)"
