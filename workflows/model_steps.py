"""AgentRun's model calls through the worker's gateway: the cap its gateway holds the
current sandbox to follows the spend budget (an `extend --spend` lifts it for the same
sandbox, before the agent is woken).

Workflow code (the activity through `calls`).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import host_steps
    from workflows.calls import model_calls
    from workflows.pure import budget, model_books
    from workflows.pure.state import SupervisorState


async def follow_budget(s: SupervisorState) -> None:
    """Set the current sandbox's cap again when the spend budget changed since it was set."""
    if not model_books.cap_due(s) or s.sandbox_id is None:
        return
    allowance = model_books.allowance_usd(s, budget.sandbox_spend_usd(s, workflow.now()))
    await model_calls.set_model_cap(
        s.spec,
        s.sandbox_id,
        allowance,
        model_books.booked_by_host(s),
        host_steps.current_route(s),
    )
    s.money.model_cap_budget = s.budget.max_spend_usd
