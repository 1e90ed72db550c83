"""The calls that make a sandbox and run its agent (activities/sandbox/activities.py): the worker's
check of a spec, the create, a start of the agent again, the namespace's search attributes."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.models import (
        ActivityName,
        AgentStarted,
        CreateSandboxInput,
        SearchAttributeCheck,
        SearchAttributeCheckInput,
        SnapshotRestore,
        SpecCheck,
        SpecCheckInput,
        StartAgentInput,
    )
    from activities.models.workspace import WorkspaceRestore
    from overnight.core.models import RunSpec
    from workflows import policies
    from workflows.calls.outcomes import describe, reraise_cancellation
    from workflows.calls.routing import on_host, routed
    from workflows.patches import LEAN_WRITES_PATCH
    from workflows.pure.hosts import ANY_WORKER, Route


async def check_spec(spec: RunSpec) -> SpecCheck:
    """What in `spec` the worker does not allow (its grants, read in the activity from the
    worker's environment; none: the run may go on) and what it must ask its pool for
    (admission). A local activity: the worker running the
    run answers, at its start, before anything is made."""
    checked: SpecCheck = await workflow.execute_local_activity(
        ActivityName.CHECK_SPEC,
        SpecCheckInput(spec=spec),
        result_type=SpecCheck,
        **policies.SPEC_CHECK.local_options(),
        summary="check the spec against this worker's grants",
    )
    return checked


def start_create_sandbox(
    spec: RunSpec,
    attempt: int,
    checkpoint: str | None,
    reason: str,
    max_total_cost_micros: int | None = None,
    restore: SnapshotRestore | None = None,
    lease_cost_micros: int | None = None,
    wants_host: bool = False,
    route: Route = ANY_WORKER,
    workspace: WorkspaceRestore | None = None,
    model_allowance_usd: float | None = None,
    model_booked_by_host: dict[str, float] | None = None,
) -> workflow.ActivityHandle[AgentStarted]:
    """Started, not awaited: a `cancel` signal must be able to interrupt a long create.
    `restore`: make it from that snapshot (recovery "snapshot") if it is still ready."""
    why = f" ({reason})" if reason else ""
    if restore is not None:
        why = f" from snapshot {restore.snapshot_id}{why}"
    elif workspace is not None:
        why = f" from the workspace kept on {workspace.ref}{why}"
    return workflow.start_activity(
        ActivityName.CREATE_SANDBOX,
        CreateSandboxInput(
            spec=spec,
            attempt=attempt,
            checkpoint=checkpoint,
            restart_reason=reason,
            max_total_cost_micros=max_total_cost_micros,
            restore=restore,
            lease_cost_micros=lease_cost_micros,
            wants_host=wants_host,
            workspace=workspace,
            model_allowance_usd=model_allowance_usd,
            model_booked_by_host=model_booked_by_host or {},
        ),
        result_type=AgentStarted,
        **policies.CREATE.options(),
        # Wait for a cancelled create to really stop, so cleanup sees the sandbox it made.
        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        summary=f"create sandbox {attempt}{why}",
        **routed(route),
    )


async def start_agent(
    spec: RunSpec,
    sandbox_id: str,
    attempt: int,
    fresh: int,
    ended: str | None = None,
    *,
    resumed: int = 0,
    done_round: int = 0,
    done_reason: str = "",
    ci_round: int = 0,
    ci_reason: str = "",
    told: str = "",
    route: Route = ANY_WORKER,
) -> AgentStarted:
    """Start the agent again in its sandbox; `ended`: the process it replaces (its last
    words come back in the result). `resumed`: after the `resumed`-th pause that ended it
    (a sandbox with no cgroup to freeze), not for a fresh context. `done_round`: the
    `done_round`-th start after a failed done check, `done_reason` naming it; `ci_round`:
    the round's start after a failing CI check, `ci_reason` naming it, `told` the agent's."""
    reason, why = "context window full: fresh start", f"fresh context {fresh}"
    if resumed:
        reason = why = "its sandbox's pause ended it (no cgroup to freeze): from the checkpoint"
    if done_round:
        reason = why = done_reason
    if ci_round:
        reason = why = ci_reason
    started: AgentStarted = await on_host(
        route,
        ActivityName.START_AGENT,
        StartAgentInput(
            spec=spec,
            sandbox_id=sandbox_id,
            attempt=attempt,
            fresh_start=fresh,
            restart_reason=reason,
            resumed=resumed,
            output_of=ended,
            secret_env=list(spec.secret_env),
            done_round=done_round,
            ci_round=ci_round,
            told=told,
        ),
        result_type=AgentStarted,
        **policies.START_AGENT.options(),
        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        summary=f"start agent again in sandbox {attempt} ({why})",
    )
    return started


async def present_search_attributes() -> list[str]:
    """Which of overnight's search attributes the namespace has; none if it cannot tell.

    Runs begun with `LEAN_WRITES_PATCH` ask through a local activity, answered from the
    worker's per-process cache (one marker event, no activity task, no extra workflow task);
    recorded histories replay the activity they had."""
    if workflow.patched(LEAN_WRITES_PATCH):
        return await _present_search_attributes(local=True)
    return await _present_search_attributes(local=False)


async def _present_search_attributes(*, local: bool) -> list[str]:
    run = workflow.execute_local_activity if local else workflow.execute_activity
    try:
        found: SearchAttributeCheck = await run(
            ActivityName.CHECK_SEARCH_ATTRIBUTES,
            SearchAttributeCheckInput(),
            result_type=SearchAttributeCheck,
            # A local activity's options, which an activity takes too.
            **policies.VISIBILITY_CHECK.local_options(),
            summary="check which search attributes the namespace has",
        )
    except (ActivityError, ApplicationError) as err:
        # A local activity's failure may come back as its own ApplicationError.
        if isinstance(err, ActivityError):
            reraise_cancellation(err)
        workflow.logger.warning("search attribute check failed, not setting any: %s", describe(err))
        return []
    return found.present
