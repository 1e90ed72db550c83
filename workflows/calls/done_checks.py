"""One command of the done check (`RunSpec.done_when`) run in the sandbox
(activities/done_checks.py)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import ActivityName, RunDoneCheckInput
    from overnight.done_check import DoneCheck, shown_command
    from overnight.models import RunSpec
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
