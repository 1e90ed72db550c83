"""The answer to an agent's request written back into its sandbox, where the kit reads it
(activities/sandbox/kit_requests.py)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import ActivityName, AnswerAgentInput
    from workflows import policies
    from workflows.calls.outcomes import best_effort
    from workflows.calls.routing import on_host
    from workflows.pure.hosts import Route
    from workflows.pure.state import SupervisorState


async def answer_agent(s: SupervisorState, route: Route, request_id: str, answer: str) -> None:
    """Best effort: an answer that cannot be written is given again when the agent asks again
    (after a restart the kit finds it; a lost write leaves the question to the next attempt)."""
    if s.sandbox_id is None:
        return
    await best_effort(
        on_host(
            route,
            ActivityName.ANSWER_AGENT,
            AnswerAgentInput(
                provider=s.spec.provider,
                sandbox_id=s.sandbox_id,
                request_id=request_id,
                answer=answer,
            ),
            **policies.ACTION.options(),
            summary=f"answer the agent's request {request_id}",
        ),
        f"answer request {request_id}",
    )
