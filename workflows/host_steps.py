"""AgentRun's host steps: the route of a step on a sandbox, and taking a host as lost.

Workflow code (the check through `calls`); the rules are in the pure `workflows.pure.hosts`. Runs
begun before `HOST_QUEUES_PATCH` know no host (`host_routing` False): every route is the run's
own queue, and their histories replay as recorded.
"""

from __future__ import annotations

import dataclasses

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import AgentStarted
    from workflows.calls import host_check
    from workflows.pure import hosts
    from workflows.pure.state import SupervisorState


def route(s: SupervisorState, sandbox_id: str | None) -> hosts.Route:
    """Where a step on `sandbox_id` goes; a step there left unstarted asks `host_lost`."""
    found = hosts.route_for(s, sandbox_id)
    if found.task_queue is None:
        return found

    async def lost(queue: str) -> bool:
        return await host_lost(s, queue) is not None

    return dataclasses.replace(found, host_lost=lost)


def current_route(s: SupervisorState) -> hosts.Route:
    return route(s, s.sandbox_id)


def queue_route(s: SupervisorState, queue: str) -> hosts.Route:
    """The route to a host queue itself (listing the run's sandboxes there)."""
    found = hosts.Route(task_queue=queue, schedule_to_start=hosts.host_wait(s))

    async def lost(queue: str) -> bool:
        return await host_lost(s, queue) is not None

    return dataclasses.replace(found, host_lost=lost)


def create_route(s: SupervisorState) -> hosts.Route:
    """Where a create goes: any worker, or for a run pinned to hosts, its chosen host's queue."""
    queue = hosts.create_queue(s, workflow.info().task_queue)
    if queue is None:
        return hosts.ANY_WORKER
    return hosts.Route(task_queue=queue, schedule_to_start=hosts.host_wait(s))


def sweep_routes(s: SupervisorState) -> list[hosts.Route]:
    """Where to look for the run's sandboxes at a sweep: each host it made one on and has not
    lost, or (no host known: a run on Runtime, or from before) the run's own queue."""
    queues = hosts.live_host_queues(s) if s.hosts.host_routing else []
    return [queue_route(s, q) for q in queues] or [hosts.ANY_WORKER]


def box_route(s: SupervisorState, sandbox_id: str, listed_on: hosts.Route) -> hosts.Route:
    """A listed sandbox's route: its own host's, else where it was listed (a half-made one)."""
    found = route(s, sandbox_id)
    return found if found.task_queue is not None else listed_on


def record_host(s: SupervisorState, started: AgentStarted) -> None:
    """A create's answer: the host queue its sandbox is reached on, if it names one."""
    if not s.hosts.host_routing or started.host_queue is None:
        return
    s.hosts.sandbox_hosts[started.sandbox_id] = started.host_queue
    if started.host_queue in s.hosts.lost_hosts:
        s.hosts.lost_hosts.remove(started.host_queue)  # it came back, and made this one
    if started.host_lost_seconds is not None:
        s.hosts.host_lost_seconds = started.host_lost_seconds
    s.hosts.host_unseen_since.pop(started.host_queue, None)


def host_seen(s: SupervisorState, queue: str | None) -> None:
    """A step on `queue` was taken: its host is there."""
    if queue is not None:
        s.hosts.host_unseen_since.pop(queue, None)


async def host_lost(s: SupervisorState, queue: str) -> str | None:
    """A step on `queue` waited unstarted: why its host is lost (then marked so), or None
    (not yet: the step is to be sent again)."""
    if queue in s.hosts.lost_hosts:
        return hosts.lost_reason_again(queue)
    now = workflow.now()
    # The step began to wait one `host_wait` ago (each try waits that long, then times out).
    since = s.hosts.host_unseen_since.setdefault(queue, now - hosts.host_wait(s))
    seen = await host_check.check_host(queue)
    if seen is None:
        return None
    if s.hosts.host_lost_seconds is None:  # no create has said it yet: the next wait is sized by it
        s.hosts.host_lost_seconds = seen.lost_after_seconds
    now = workflow.now()
    if seen.last_poll_at is not None and seen.last_poll_at > since:
        # A worker polled the queue since the step began to wait (a busy host, or one back
        # just now): it is there.
        s.hosts.host_unseen_since.pop(queue, None)
        return None
    if not hosts.is_lost(seen, since, now):
        workflow.logger.warning("host queue %s unpolled since %s; waiting", queue, since)
        return None
    s.hosts.lost_hosts.append(queue)
    reason = hosts.lost_reason(queue, seen, now)
    workflow.logger.warning("%s", reason)
    return reason
