"""Where a step on a sandbox is sent: the run's own queue, or its host's
(`<task queue>@<host>`, `workflows.pure.hosts.Route`), sent again while the host is not lost."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, TimeoutError, TimeoutType

with workflow.unsafe.imports_passed_through():
    from workflows.pure.hosts import Route


async def on_host(route: Route, name: str, arg: object, **options: Any) -> Any:
    """`execute_activity` along `route`: on a host's queue, a step no worker started within
    the route's wait is sent again while the host is not lost (`Route.host_lost` says), so a
    worker restarting costs the step nothing; given up (the timeout raised) once it is lost."""
    while True:
        try:
            return await workflow.execute_activity(name, arg, **options, **routed(route))
        except ActivityError as err:
            if route.task_queue is None or route.host_lost is None or not waited_unstarted(err):
                raise
            if await route.host_lost(route.task_queue):
                raise


def routed(route: Route) -> dict[str, Any]:
    """The options of a step along `route`; none on the run's own queue, so the command a
    run begun before host queues records is the one it always did."""
    if route.task_queue is None:
        return {}
    return {"task_queue": route.task_queue, "schedule_to_start_timeout": route.schedule_to_start}


def given_up(route: Route, what: str) -> bool:
    """A best-effort step on a host the run took as lost is not sent (it would never start)."""
    if route.lost:
        workflow.logger.warning("%s not sent: its host %s was lost", what, route.task_queue)
    return route.lost


def waited_unstarted(err: ActivityError) -> bool:
    """The step waited in its queue past its schedule-to-start timeout: no worker took it."""
    cause = err.cause
    return isinstance(cause, TimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START
