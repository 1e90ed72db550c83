"""AgentRun's fresh-context start: the agent started again in the same sandbox.

Workflow code (the activity through `calls`).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from workflows import calls, host_steps
    from workflows.notice import note_last_words
    from workflows.state import SupervisorState


async def fresh_start(s: SupervisorState) -> str | None:
    """Start the agent again with a fresh context; why a restart is needed instead when it
    could not be started (None: it runs)."""
    assert s.sandbox_id is not None
    s.fresh_starts_used += 1
    ended = s.process_id
    try:
        started = await calls.start_agent(
            s.spec,
            s.sandbox_id,
            s.attempt,
            s.fresh_starts_used,
            ended,
            route=host_steps.current_route(s),
        )
    except ActivityError as err:
        calls.reraise_cancellation(err)
        return f"could not start the agent again: {calls.describe(err)}"
    exit_code = s.spec.fresh_context_exit_code
    note_last_words(
        s, started.previous_output, f"context window full (exit {exit_code})", workflow.now()
    )
    s.process_id = started.process_id
    s.process_fresh_start = s.fresh_starts_used
    s.last_progress_at = workflow.now()
    return None
