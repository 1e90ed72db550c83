"""AgentRun's activity calls: each with its timeouts, retry policy and a summary for the Web UI.

Activities are called by registered name with models from `activities.models`, so the workflow
never imports a provider.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    TimeoutError,
    TimeoutType,
    is_cancelled_exception,
)

with workflow.unsafe.imports_passed_through():
    from activities.host_models import HostCheckInput, HostSeen
    from activities.models import (
        ActivityName,
        AgentStarted,
        CheckpointSalvage,
        CreateSandboxInput,
        ExtendSandboxInput,
        ListSandboxesInput,
        MoneyRead,
        Observation,
        ObserveInput,
        ReadCheckpointInput,
        ReadDailyLimitInput,
        RunDoneCheckInput,
        SandboxInfo,
        SandboxList,
        SandboxRef,
        SandboxSettled,
        SearchAttributeCheck,
        SearchAttributeCheckInput,
        SnapshotRestore,
        SpecCheck,
        SpecCheckInput,
        StartAgentInput,
    )
    from activities.workspace_models import WorkspaceRestore
    from overnight.agent_requests import requests_path
    from overnight.done_check import DoneCheck, shown_command
    from overnight.models import RunSpec
    from workflows import money, policies, publish
    from workflows.hosts import ANY_WORKER, Route
    from workflows.patches import DEADLINE_LOOK_BOUNDED_PATCH
    from workflows.state import SupervisorState

# What the provider says when the key's daily spending limit refuses a step.
DAILY_LIMIT_TYPE = "DailySpendingLimit"


@dataclass(frozen=True)
class DailyLimitRefused:
    """A wake or extension refused because the key's daily spending limit cannot cover it."""

    text: str


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
        ),
        result_type=AgentStarted,
        start_to_close_timeout=policies.CREATE_TIMEOUT,
        heartbeat_timeout=policies.CREATE_HEARTBEAT,
        retry_policy=policies.CREATE_RETRY,
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
    route: Route = ANY_WORKER,
) -> AgentStarted:
    """Start the agent again in its sandbox; `ended`: the process it replaces (its last
    words come back in the result). `resumed`: after the `resumed`-th pause that ended it
    (a sandbox with no cgroup to freeze), not for a fresh context. `done_round`: the
    `done_round`-th start after a failed done check, `done_reason` naming it."""
    reason, why = "context window full: fresh start", f"fresh context {fresh}"
    if resumed:
        reason = why = "its sandbox's pause ended it (no cgroup to freeze): from the checkpoint"
    if done_round:
        reason = why = done_reason
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
        ),
        result_type=AgentStarted,
        start_to_close_timeout=policies.ACTION_TIMEOUT,
        heartbeat_timeout=policies.CREATE_HEARTBEAT,
        retry_policy=policies.ACTION_RETRY,
        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        summary=f"start agent again in sandbox {attempt} ({why})",
    )
    return started


async def run_done_check(
    spec: RunSpec,
    sandbox_id: str,
    index: int,
    round_number: int,
    attempt: int,
    *,
    route: Route = ANY_WORKER,
) -> DoneCheck:
    """Run `spec.done_when[index]` in the sandbox; its outcome (a failed check is a result,
    not an error: an error is a check that could not be run)."""
    command = spec.done_when[index]
    where = f"{index + 1} of {len(spec.done_when)}"
    checked: DoneCheck = await on_host(
        route,
        ActivityName.RUN_DONE_CHECK,
        RunDoneCheckInput(
            provider=spec.provider,
            sandbox_id=sandbox_id,
            command=command,
            index=index,
            round=round_number,
            cwd=spec.cwd,
            env=dict(spec.env),
            timeout_seconds=spec.done_check_timeout_seconds,
            secret_env=list(spec.secret_env),
        ),
        result_type=DoneCheck,
        start_to_close_timeout=policies.done_check_timeout(spec.done_check_timeout_seconds),
        heartbeat_timeout=policies.DONE_CHECK_HEARTBEAT,
        retry_policy=policies.DONE_CHECK_RETRY,
        summary=f"done check {where} in sandbox {attempt}: {shown_command(command)}",
    )
    return checked


async def read_checkpoint(
    spec: RunSpec,
    sandbox_id: str,
    known_digest: str | None,
    why: str,
    *,
    wake_paused: bool = False,
    output_of: str | None = None,
    requests_path: str | None = None,
    known_requests_digest: str | None = None,
    route: Route = ANY_WORKER,
    timeout: timedelta = policies.ACTION_TIMEOUT,
) -> CheckpointSalvage | None:
    """The checkpoint if it changed; None when unchanged or unreadable (best effort).
    `wake_paused`: the sandbox is paused (at its lease end): wake it to salvage the file.
    `output_of`: the agent process whose last words to bring back too. `requests_path`: the
    kit's requests file to read too (runs that read it; see `requests_path_of`)."""
    if _given_up(route, f"copy checkpoint ({why})"):
        return None
    try:
        read: CheckpointSalvage = await on_host(
            route,
            ActivityName.READ_CHECKPOINT,
            ReadCheckpointInput(
                provider=spec.provider,
                sandbox_id=sandbox_id,
                checkpoint_path=spec.checkpoint_path,
                max_bytes=spec.max_checkpoint_bytes,
                known_digest=known_digest,
                wake_paused=wake_paused,
                output_of=output_of,
                secret_env=list(spec.secret_env),
                requests_path=requests_path,
                known_requests_digest=known_requests_digest,
                session_store_of=session_store_of(spec),
            ),
            result_type=CheckpointSalvage,
            start_to_close_timeout=timeout,
            retry_policy=policies.CLEANUP_RETRY,
            summary=f"copy checkpoint ({why})",
        )
    except ActivityError as err:
        reraise_cancellation(err)
        workflow.logger.warning("could not copy the checkpoint (%s): %s", why, describe(err))
        return None
    return read


async def pause_or_stop(
    spec: RunSpec,
    sandbox_id: str,
    *,
    stop: bool,
    why: str,
    read_charge: bool = False,
    keep_until: datetime | None = None,
    route: Route = ANY_WORKER,
) -> SandboxSettled | None:
    """Best effort: a failed pause or stop is logged and never hides what caused it (None).
    `read_charge`: the sandbox's end, so bring back what the provider charged for it;
    `keep_until`: a pause that labels the sandbox kept for a look until then."""
    name = ActivityName.STOP_SANDBOX if stop else ActivityName.PAUSE_SANDBOX
    verb = "stop" if stop else "pause"
    ref = SandboxRef(
        provider=spec.provider,
        sandbox_id=sandbox_id,
        read_charge=read_charge,
        keep_until=keep_until,
    )
    if _given_up(route, f"{verb} sandbox {sandbox_id}"):
        return None
    try:
        settled: SandboxSettled = await on_host(
            route,
            name,
            ref,
            result_type=SandboxSettled,
            start_to_close_timeout=policies.ACTION_TIMEOUT,
            heartbeat_timeout=policies.ACTION_HEARTBEAT,
            retry_policy=policies.CLEANUP_RETRY,
            summary=f"{verb} sandbox {sandbox_id} ({why})",
        )
        return settled
    except ActivityError as err:
        reraise_cancellation(err)
        workflow.logger.warning("could not %s sandbox %s: %s", verb, sandbox_id, describe(err))
        return None


async def wake_sandbox(
    spec: RunSpec,
    sandbox_id: str,
    why: str,
    *,
    daily_room_micros: int | None = None,
    route: Route = ANY_WORKER,
) -> SandboxInfo | DailyLimitRefused | None:
    """A paused sandbox carried on with a fresh lease; None when it could not be woken.
    `daily_room_micros`: what the fresh lease commits, checked against the daily limit."""
    return await _sandbox_call(
        ActivityName.WAKE_SANDBOX,
        SandboxRef(
            provider=spec.provider, sandbox_id=sandbox_id, daily_room_micros=daily_room_micros
        ),
        f"wake sandbox {sandbox_id} ({why})",
        route,
    )


async def extend_sandbox(
    spec: RunSpec,
    sandbox_id: str,
    until: datetime,
    why: str,
    *,
    micros_per_second: float | None = None,
    route: Route = ANY_WORKER,
) -> SandboxInfo | DailyLimitRefused | None:
    """The lease moved to `until`; None when it could not be (the lease then ends as set)."""
    return await _sandbox_call(
        ActivityName.EXTEND_SANDBOX,
        ExtendSandboxInput(
            provider=spec.provider,
            sandbox_id=sandbox_id,
            until=until,
            micros_per_second=micros_per_second,
        ),
        f"extend sandbox {sandbox_id} to {until:%H:%M:%S} UTC ({why})",
        route,
    )


async def _sandbox_call(
    name: str, arg: object, summary: str, route: Route
) -> SandboxInfo | DailyLimitRefused | None:
    if _given_up(route, summary):
        return None
    try:
        info: SandboxInfo = await on_host(
            route,
            name,
            arg,
            result_type=SandboxInfo,
            start_to_close_timeout=policies.ACTION_TIMEOUT,
            heartbeat_timeout=policies.ACTION_HEARTBEAT,
            retry_policy=policies.ACTION_RETRY,
            summary=summary,
        )
    except ActivityError as err:
        reraise_cancellation(err)
        workflow.logger.warning("%s failed: %s", summary, describe(err))
        if error_type(err) == DAILY_LIMIT_TYPE:
            return DailyLimitRefused(describe(err))
        return None
    return info


async def read_daily_limit(spec: RunSpec) -> MoneyRead | None:
    """The key's daily spending limit, read fresh; None when it could not be read."""
    try:
        read: MoneyRead = await workflow.execute_activity(
            ActivityName.READ_DAILY_LIMIT,
            ReadDailyLimitInput(provider=spec.provider),
            result_type=MoneyRead,
            start_to_close_timeout=policies.ACTION_TIMEOUT,
            retry_policy=policies.CLEANUP_RETRY,
            summary="read the key's daily spending limit (waiting for its window)",
        )
    except ActivityError as err:
        reraise_cancellation(err)
        workflow.logger.warning("could not read the daily spending limit: %s", describe(err))
        return None
    return read


async def list_sandboxes(spec: RunSpec, route: Route = ANY_WORKER) -> list[SandboxInfo]:
    """This run's sandboxes, as the worker `route` reaches sees them (a host's, for local)."""
    if _given_up(route, "list this run's sandboxes"):
        return []
    try:
        found: SandboxList = await on_host(
            route,
            ActivityName.LIST_SANDBOXES,
            ListSandboxesInput(provider=spec.provider, run_id=spec.run_id),
            result_type=SandboxList,
            start_to_close_timeout=policies.ACTION_TIMEOUT,
            heartbeat_timeout=policies.ACTION_HEARTBEAT,
            retry_policy=policies.CLEANUP_RETRY,
            summary="list this run's sandboxes (cleanup)",
        )
    except ActivityError as err:
        reraise_cancellation(err)
        workflow.logger.warning("could not list this run's sandboxes: %s", describe(err))
        return []
    return found.sandboxes


async def present_search_attributes() -> list[str]:
    """Which of overnight's search attributes the namespace has; none if it cannot tell.

    Runs begun with `LEAN_WRITES_PATCH` ask through a local activity, answered from the
    worker's per-process cache (one marker event, no activity task, no extra workflow task);
    recorded histories replay the activity they had."""
    if workflow.patched(publish.LEAN_WRITES_PATCH):
        return await _present_search_attributes(local=True)
    return await _present_search_attributes(local=False)


async def _present_search_attributes(*, local: bool) -> list[str]:
    run = workflow.execute_local_activity if local else workflow.execute_activity
    try:
        found: SearchAttributeCheck = await run(
            ActivityName.CHECK_SEARCH_ATTRIBUTES,
            SearchAttributeCheckInput(),
            result_type=SearchAttributeCheck,
            start_to_close_timeout=policies.VISIBILITY_CHECK_TIMEOUT,
            retry_policy=policies.VISIBILITY_CHECK_RETRY,
            summary="check which search attributes the namespace has",
        )
    except (ActivityError, ApplicationError) as err:
        # A local activity's failure may come back as its own ApplicationError.
        if isinstance(err, ActivityError):
            reraise_cancellation(err)
        workflow.logger.warning("search attribute check failed, not setting any: %s", describe(err))
        return []
    return found.present


async def check_spec(spec: RunSpec) -> SpecCheck:
    """What in `spec` the worker does not allow (its grants, read in the activity from the
    worker's environment; none: the run may go on) and what it must ask its pool for
    (admission). A local activity: the worker running the
    run answers, at its start, before anything is made."""
    checked: SpecCheck = await workflow.execute_local_activity(
        ActivityName.CHECK_SPEC,
        SpecCheckInput(spec=spec),
        result_type=SpecCheck,
        start_to_close_timeout=policies.SPEC_CHECK_TIMEOUT,
        retry_policy=policies.SPEC_CHECK_RETRY,
        summary="check the spec against this worker's grants",
    )
    return checked


def start_observe(
    s: SupervisorState, wait: float, *, at_deadline: bool = False, route: Route = ANY_WORKER
) -> workflow.ActivityHandle[Observation]:
    """One long poll of the current agent, at most `wait` seconds (started, not awaited: a
    signal may interrupt it). `at_deadline`: the wait ends at a deadline that must be kept
    even if the worker watching dies (the stall), so the attempt times out soon after it."""
    assert s.sandbox_id is not None and s.process_id is not None
    spec = s.spec
    return workflow.start_activity(
        ActivityName.OBSERVE_AGENT,
        ObserveInput(
            provider=spec.provider,
            sandbox_id=s.sandbox_id,
            process_id=s.process_id,
            checkpoint_path=spec.checkpoint_path,
            max_checkpoint_bytes=spec.max_checkpoint_bytes,
            known_digest=s.seen_digest,
            wait_seconds=wait,
            check_interval_seconds=min(spec.poll_seconds, 1.0),
            watch_token=s.watch_token,
            report_every_seconds=spec.poll_seconds,
            read_money=money.money_due(s, workflow.now()),
            secret_env=list(spec.secret_env),
            requests_path=requests_path_of(s),
            known_requests_digest=s.requests_digest,
            session_store_of=session_store_of(spec),
        ),
        result_type=Observation,
        start_to_close_timeout=observe_timeout(wait, at_deadline=at_deadline),
        schedule_to_close_timeout=deadline_look_timeout(wait, at_deadline=at_deadline),
        heartbeat_timeout=policies.observe_heartbeat(spec.poll_seconds),
        retry_policy=policies.OBSERVE_RETRY,
        summary=f"watch agent in sandbox {s.attempt}",
        **routed(route),
    )


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


def _given_up(route: Route, what: str) -> bool:
    """A best-effort step on a host the run took as lost is not sent (it would never start)."""
    if route.lost:
        workflow.logger.warning("%s not sent: its host %s was lost", what, route.task_queue)
    return route.lost


def waited_unstarted(err: ActivityError) -> bool:
    """The step waited in its queue past its schedule-to-start timeout: no worker took it."""
    cause = err.cause
    return isinstance(cause, TimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START


async def check_host(host_queue: str) -> HostSeen | None:
    """What the server says of a host queue's pollers, asked on the run's own queue (any
    worker answers); None when it could not be asked (the host is then not taken as lost)."""
    try:
        seen: HostSeen = await workflow.execute_activity(
            ActivityName.CHECK_HOST,
            HostCheckInput(host_queue=host_queue),
            result_type=HostSeen,
            start_to_close_timeout=policies.HOST_CHECK_TIMEOUT,
            retry_policy=policies.HOST_CHECK_RETRY,
            summary=f"is host queue {host_queue} polled? (a step there waited unstarted)",
        )
    except ActivityError as err:
        reraise_cancellation(err)
        workflow.logger.warning("could not check host queue %s: %s", host_queue, describe(err))
        return None
    return seen


def session_store_of(spec: RunSpec) -> str | None:
    """A coding agent on Runtime has its session carried to the worker's store after each
    checkpoint (no mount there). Such runs were refused before, so no history differs."""
    return spec.run_id if spec.agent is not None and spec.provider == "runtime" else None


def requests_path_of(s: SupervisorState) -> str | None:
    """The kit's requests file beside the checkpoint, for runs that read it (else None)."""
    return requests_path(s.spec.checkpoint_path) if s.requests_file else None


def deadline_look_bounded(at_deadline: bool) -> bool:
    """Whether a look ending at the stall deadline has a whole-look time limit (runs that
    meet DEADLINE_LOOK_BOUNDED_PATCH)."""
    return at_deadline and workflow.patched(DEADLINE_LOOK_BOUNDED_PATCH)


def deadline_look_timeout(wait_seconds: float, *, at_deadline: bool) -> timedelta | None:
    """A look ending at the stall deadline, its retries included, ends this soon after it
    (then `lost_at_deadline`); None: no whole-look limit (runs before the patch, other looks)."""
    if not deadline_look_bounded(at_deadline):
        return None
    return observe_timeout(wait_seconds, at_deadline=True)


def lost_at_deadline(err: ActivityError) -> bool:
    """A look with a whole-look time limit ended without an answer for want of time: it ran
    out (its worker, or its retry's, died), or its last try failed with a fault a retry could
    have cleared when no time was left for one (an API storm). Nothing is known of the agent:
    look again. A fault no retry clears is not this."""
    cause = err.cause
    if isinstance(cause, TimeoutError):
        return cause.type == TimeoutType.SCHEDULE_TO_CLOSE
    if isinstance(cause, ApplicationError):
        return not cause.non_retryable and cause.type not in policies.NON_RETRYABLE_TYPES
    return False


def observe_timeout(wait_seconds: float, *, at_deadline: bool = False) -> timedelta:
    grace = policies.DEADLINE_OBSERVE_GRACE if at_deadline else policies.OBSERVE_GRACE
    return timedelta(seconds=wait_seconds) + grace


def reraise_cancellation(err: ActivityError) -> None:
    """A Temporal cancellation that lands mid-activity arrives as an ActivityError; it must
    still end the run as cancelled, not be mistaken for a provider failure."""
    if is_cancelled_exception(err):
        raise asyncio.CancelledError() from err


def error_type(err: ActivityError) -> str | None:
    """The `type` of the ApplicationError behind an activity failure, if there is one."""
    cause = err.cause
    return cause.type if isinstance(cause, ApplicationError) else None


def handed_over(err: ActivityError) -> bool:
    """The activity ended because its worker began a graceful shutdown (`WorkerShutdown`,
    activities.heartbeat): nothing is wrong with the sandbox."""
    return error_type(err) == "WorkerShutdown"


def describe(err: BaseException) -> str:
    """The innermost cause of an activity failure, for logs and restart reasons."""
    while err.__cause__ is not None:
        err = err.__cause__
    return str(err)
