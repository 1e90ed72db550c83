"""The done check's calls: one command run (activities/delivery/done_checks.py), in the agent's
sandbox or in the run's check sandbox, and that check sandbox made ready at the run's pushed work
(activities/delivery/done_sandbox.py)."""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import ActivityName, RunDoneCheckInput
    from activities.models.done_sandbox import DoneCheckSandbox, PrepareDoneCheckInput
    from overnight.core.done_check import DoneCheck, shown_command
    from overnight.core.models import RunSpec
    from workflows import policies
    from workflows.calls.routing import on_host
    from workflows.pure.hosts import ANY_WORKER, Route


async def run_done_check(
    spec: RunSpec,
    sandbox_id: str,
    index: int,
    round_number: int,
    attempt: int,
    *,
    route: Route = ANY_WORKER,
    in_place: bool = False,
    agent_sandbox_id: str | None = None,
    commit: str | None = None,
) -> DoneCheck:
    """Run `spec.done_when[index]` (`done_when_in_place[index]` when `in_place`) in the sandbox;
    its outcome (a failed check is a result, not an error: an error is a check that could not
    be run). `agent_sandbox_id`: `sandbox_id` is the run's check sandbox, at `commit`, and a
    failure is written for the agent in its own."""
    commands = spec.done_when_in_place if in_place else spec.done_when
    command = commands[index]
    where = f"{index + 1} of {len(commands)}"
    if in_place:
        where += " in place"
    place = f"sandbox {attempt}"
    if agent_sandbox_id is not None:
        place = f"its own sandbox at {(commit or '?')[:12]}"
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
            tell_sandbox_id=agent_sandbox_id,
            commit=commit,
            in_place=in_place,
        ),
        result_type=DoneCheck,
        **policies.done_check(spec.done_check_timeout_seconds).options(),
        summary=f"done check {where} in {place}: {shown_command(command)}",
    )
    return checked


async def prepare_done_check(
    spec: RunSpec,
    agent_sandbox_id: str,
    number: int,
    round_number: int,
    *,
    at: datetime,
    previous: str | None,
    max_total_cost_micros: int | None,
    lease_cost_micros: int | None,
    route: Route = ANY_WORKER,
) -> DoneCheckSandbox:
    """Push the agent's work, confirm it on the origin and make check sandbox `number` with a
    clean clone at it; or why the work could not be checked (`problem`, not an error)."""
    prepared: DoneCheckSandbox = await on_host(
        route,
        ActivityName.PREPARE_DONE_CHECK,
        PrepareDoneCheckInput(
            spec=spec,
            agent_sandbox_id=agent_sandbox_id,
            number=number,
            round=round_number,
            at=at,
            previous=previous,
            timeout_seconds=spec.sandbox_timeout_seconds,
            max_total_cost_micros=max_total_cost_micros,
            lease_cost_micros=lease_cost_micros,
        ),
        result_type=DoneCheckSandbox,
        **policies.PREPARE_DONE_CHECK.options(),
        # Given up, it is waited for until it stopped, so the sweep after it sees its sandbox.
        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        summary=f"push the work and make done check sandbox {number} at it (round {round_number})",
    )
    return prepared
