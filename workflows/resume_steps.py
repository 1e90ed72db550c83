"""AgentRun's step after waking a sandbox whose pause ended its agents.

A local sandbox on a machine with no cgroup to freeze is never paused unmetered: its pause
ends the agents and keeps the files (`SandboxInfo.pause_ends_agents`). After the wake, the run
goes on as if the agent had been paused: a fresh agent process in the same sandbox, from its
checkpoint, counted neither as a restart nor as a fresh-context start.

Workflow code (the activity through `calls`); behind `PAUSE_ENDS_AGENTS_PATCH`.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.models import SandboxInfo
    from workflows import calls, host_steps
    from workflows.patches import PAUSE_ENDS_AGENTS_PATCH
    from workflows.state import SupervisorState


async def after_wake(s: SupervisorState, woken: SandboxInfo, *, was_paused: bool) -> bool:
    """The agent runs on after the wake (the same process, or one started again in its
    place); False when it had to be started again and could not be."""
    if not (was_paused and woken.pause_ends_agents):
        return True
    if not workflow.patched(PAUSE_ENDS_AGENTS_PATCH):
        return True  # histories recorded before: the dead agent is seen as before
    assert s.sandbox_id is not None
    s.pause_resumes += 1
    try:
        started = await calls.start_agent(
            s.spec,
            s.sandbox_id,
            s.attempt,
            s.process_fresh_start,
            s.process_id,
            resumed=s.pause_resumes,
            route=host_steps.current_route(s),
        )
    except ActivityError as err:
        calls.reraise_cancellation(err)
        workflow.logger.warning("could not start the agent again: %s", calls.describe(err))
        return False
    workflow.logger.info("agent started again after its sandbox's pause ended it")
    s.process_id = started.process_id
    s.last_progress_at = workflow.now()
    return True
