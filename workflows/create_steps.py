"""AgentRun's create step: a sandbox made (and its agent started), on the hosts the run may use.

Workflow code (the activity through `calls`). Started, not awaited, so a `cancel` signal can
interrupt a long create; a Temporal cancellation lets the create really stop first, so cleanup
sees the sandbox it made. A run pinned to hosts (`RunSpec.hosts`) sends its create to the
first of them not lost (workflows.pure.hosts); one no worker of that host takes within its wait is
sent again, to the next host once that one is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.models import AgentStarted, SnapshotRestore
    from overnight.core.model_access import model_plan
    from workflows import host_steps
    from workflows.calls import routing, sandbox
    from workflows.patches import GATEWAY_MODELS_PATCH, NO_CREATE_AFTER_CANCEL_PATCH
    from workflows.pure import budget, model_books, workspace
    from workflows.pure.hosts import Route
    from workflows.pure.state import SupervisorState

Publish = Callable[[SupervisorState], None]

# A pinned create waits for one of its hosts at most this many waits (an hour at the default
# lost threshold), then fails as any create that could not be made (the run needs attention).
PINNED_CREATE_TRIES = 60


async def create(
    s: SupervisorState,
    reason: str,
    cost_cap: int | None,
    restore: SnapshotRestore | None,
    lease_cost: int | None,
    publish: Publish | None = None,
) -> AgentStarted | None:
    """The new sandbox's agent started; None when the run was cancelled before a create began
    (nothing made); ActivityError when it could not be made. `publish`: the card is published
    again as a failed try's note comes in (what the run waits on)."""
    if not s.money.gateway_metered and model_plan(s.spec) is not None:
        # Its model calls through the worker's gateway, their spend counted there.
        s.money.gateway_metered = workflow.patched(GATEWAY_MODELS_PATCH)
    try:
        return await _create(s, reason, cost_cap, restore, lease_cost, publish)
    finally:
        s.waiting_on = None  # made, or failed for good: nothing to wait on any more


async def _create(
    s: SupervisorState,
    reason: str,
    cost_cap: int | None,
    restore: SnapshotRestore | None,
    lease_cost: int | None,
    publish: Publish | None,
) -> AgentStarted | None:
    tries = 0
    while True:
        if s.cancel_requested and workflow.patched(NO_CREATE_AFTER_CANCEL_PATCH):
            # A create started now would be cancelled before it began, and its handle would
            # raise a bare CancelledError (not an ActivityError), failing the run.
            return None
        route = host_steps.create_route(s)
        try:
            return await _create_on(s, route, reason, cost_cap, restore, lease_cost, publish)
        except ActivityError as err:
            tries += 1
            unstarted = route.task_queue is not None and routing.waited_unstarted(err)
            if s.cancel_requested or not unstarted or tries >= PINNED_CREATE_TRIES:
                raise
            assert route.task_queue is not None
            # No worker of that host took it: asked whether it is lost (the next try goes to
            # the next allowed host if so).
            await host_steps.host_lost(s, route.task_queue)


async def _create_on(
    s: SupervisorState,
    route: Route,
    reason: str,
    cost_cap: int | None,
    restore: SnapshotRestore | None,
    lease_cost: int | None,
    publish: Publish | None,
) -> AgentStarted:
    handle = sandbox.start_create_sandbox(
        s.spec,
        s.attempt,
        s.progress.checkpoint,
        reason,
        cost_cap,
        restore=restore,
        lease_cost_micros=lease_cost,
        wants_host=s.hosts.host_routing,
        route=route,
        workspace=workspace.restore_for(s),
        model_allowance_usd=_model_allowance(s),
        model_booked_by_host=model_books.booked_by_host(s),
    )
    s.money.model_cap_budget = s.budget.max_spend_usd
    try:
        await _wait_publishing(s, handle, publish)
    except asyncio.CancelledError:
        # Temporal cancellation: let the create really stop before cleanup looks around.
        handle.cancel()
        with contextlib.suppress(ActivityError, asyncio.CancelledError):
            await handle
        raise
    if not handle.done():
        handle.cancel()
    started: AgentStarted = await handle
    workspace.take_started(s, started, workflow.now())
    return started


async def _wait_publishing(
    s: SupervisorState, handle: asyncio.Future[AgentStarted], publish: Publish | None
) -> None:
    """Until the create is done or a cancel is asked; each failed try's note that comes in
    meanwhile published (on the card until the next)."""
    shown = s.waiting_on

    def done() -> bool:
        return handle.done() or s.cancel_requested

    def noted() -> bool:
        return publish is not None and s.waiting_on is not shown

    while not done():
        await workflow.wait_condition(lambda: done() or noted())
        if noted() and publish is not None:
            shown = s.waiting_on
            publish(s)


def _model_allowance(s: SupervisorState) -> float | None:
    if not s.money.gateway_metered:
        return None
    return model_books.allowance_usd(s, budget.sandbox_spend_usd(s, workflow.now()))
