"""Pausing, stopping, waking, extending and listing a run's sandboxes (the lifecycle
activities), and freeing its store on a worker at its end: each best effort, since a failed
one must never hide what caused it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.models import (
        ActivityName,
        ExtendSandboxInput,
        ListSandboxesInput,
        RunStoreFreed,
        RunStoreRef,
        SandboxInfo,
        SandboxList,
        SandboxRef,
        SandboxSettled,
    )
    from overnight.core.models import RunSpec
    from overnight.core.runtime_model_key import runtime_key_plan
    from workflows import policies
    from workflows.calls.outcomes import best_effort, describe, error_type, outcome
    from workflows.calls.routing import given_up, on_host
    from workflows.pure.hosts import ANY_WORKER, Route

# What the provider says when the key's daily spending limit refuses a step.
DAILY_LIMIT_TYPE = "DailySpendingLimit"


@dataclass(frozen=True)
class DailyLimitRefused:
    """A wake or extension refused because the key's daily spending limit cannot cover it."""

    text: str


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
    if given_up(route, f"{verb} sandbox {sandbox_id}"):
        return None
    settled: SandboxSettled | None = await best_effort(
        on_host(
            route,
            name,
            ref,
            result_type=SandboxSettled,
            **policies.SANDBOX_CLEANUP.options(),
            summary=f"{verb} sandbox {sandbox_id} ({why})",
        ),
        f"{verb} sandbox {sandbox_id}",
    )
    return settled


async def free_run_store(spec: RunSpec, why: str, *, route: Route = ANY_WORKER) -> None:
    """Best effort: the run's store on the worker `route` reaches (a coding agent's session
    store) deleted, and the Runtime egress secret holding its model key erased, the run's
    sandboxes already ended; a store left is `overnight reap`'s, a secret left is not."""
    if given_up(route, "free the run's session store"):
        return
    await best_effort(
        on_host(
            route,
            ActivityName.FREE_RUN_STORE,
            RunStoreRef(
                provider=spec.provider, run_id=spec.run_id, egress_secret=egress_secret(spec)
            ),
            result_type=RunStoreFreed,
            **policies.SANDBOX_CLEANUP.options(),
            summary=f"free the run's session store ({why})",
        ),
        "free the run's session store",
    )


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
    if given_up(route, summary):
        return None
    ended = await outcome(
        on_host(
            route,
            name,
            arg,
            result_type=SandboxInfo,
            **policies.SANDBOX_ACTION.options(),
            summary=summary,
        )
    )
    if isinstance(ended, ActivityError):
        workflow.logger.warning("%s failed: %s", summary, describe(ended))
        if error_type(ended) == DAILY_LIMIT_TYPE:
            return DailyLimitRefused(describe(ended))
        return None
    info: SandboxInfo = ended
    return info


async def list_sandboxes(spec: RunSpec, route: Route = ANY_WORKER) -> list[SandboxInfo]:
    """This run's sandboxes, as the worker `route` reaches sees them (a host's, for local)."""
    if given_up(route, "list this run's sandboxes"):
        return []
    found: SandboxList | None = await best_effort(
        on_host(
            route,
            ActivityName.LIST_SANDBOXES,
            ListSandboxesInput(provider=spec.provider, run_id=spec.run_id),
            result_type=SandboxList,
            **policies.SANDBOX_CLEANUP.options(),
            summary="list this run's sandboxes (cleanup)",
        ),
        "list this run's sandboxes",
    )
    return [] if found is None else found.sandboxes


def egress_secret(spec: RunSpec) -> str:
    """The Runtime egress secret holding the run's model key, "" for none."""
    plan = runtime_key_plan(spec)
    return "" if plan is None else plan.secret_name
