"""The gateway's cap on a sandbox's model calls, set again after the spend budget grew
(activities/coding_agent/model_calls.py `set_model_cap`): best effort, since the run's own budget
check pauses the sandbox at the budget whatever the gateway holds."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import ActivityName, SetModelCapInput
    from overnight.core.models import RunSpec
    from workflows import policies
    from workflows.calls.outcomes import best_effort
    from workflows.calls.routing import given_up, on_host
    from workflows.pure.hosts import Route


async def set_model_cap(
    spec: RunSpec,
    sandbox_id: str,
    allowance_usd: float | None,
    booked_by_host: dict[str, float],
    route: Route,
) -> bool:
    """True when the sandbox's gateway holds the new cap."""
    shown = "none" if allowance_usd is None else f"${allowance_usd:.2f}"
    if given_up(route, f"set the model spend cap of sandbox {sandbox_id}"):
        return False
    done: bool | None = await best_effort(
        on_host(
            route,
            ActivityName.SET_MODEL_CAP,
            SetModelCapInput(
                provider=spec.provider,
                sandbox_id=sandbox_id,
                model_allowance_usd=allowance_usd,
                model_booked_by_host=booked_by_host,
            ),
            result_type=bool,
            **policies.CLEANUP.options(),
            summary=f"set the model spend cap of sandbox {sandbox_id} (allowance {shown})",
        ),
        "set the model spend cap",
    )
    return bool(done)
