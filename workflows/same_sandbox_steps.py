"""AgentRun starting its agent again in the same sandbox, not as a restart: after it exited
with a full context window (a fresh-context start), and after a wake whose pause ended it.

A local sandbox on a machine with no cgroup to freeze is never paused unmetered: its pause
ends the agents and keeps the files (`SandboxInfo.pause_ends_agents`). After the wake, the run
goes on as if the agent had been paused: a fresh agent process in the same sandbox, from its
checkpoint, counted neither as a restart nor as a fresh-context start (behind
`PAUSE_ENDS_AGENTS_PATCH`).
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.models import SandboxInfo
    from workflows import host_steps
    from workflows.calls import outcomes, sandbox
    from workflows.patches import FRESH_START_LOOKS_AGAIN_PATCH, PAUSE_ENDS_AGENTS_PATCH
    from workflows.pure.run_record import note_last_words
    from workflows.pure.state import SupervisorState


# What a start meets when its sandbox stopped running after the look (a provider's kind).
NOT_RUNNING = "SandboxNotRunning"


@dataclass(frozen=True)
class LookAgain:
    """The sandbox was no longer running when the fresh start came (its lease can end between
    the look that saw the exit and the start): the next look decides, a wake at a lease end or
    a restart, and the fresh start is not used up."""

    why: str


async def fresh_start(s: SupervisorState) -> str | LookAgain | None:
    """Start the agent again with a fresh context; why a restart is needed instead when it
    could not be started (None: it runs)."""
    assert s.sandbox_id is not None
    s.attempts.fresh_starts_used += 1
    ended = s.process_id
    started = await outcomes.outcome(
        sandbox.start_agent(
            s.spec,
            s.sandbox_id,
            s.attempt,
            s.attempts.fresh_starts_used,
            ended,
            route=host_steps.current_route(s),
        )
    )
    if isinstance(started, ActivityError):
        why = outcomes.describe(started)
        if outcomes.error_type(started) == NOT_RUNNING and workflow.patched(
            FRESH_START_LOOKS_AGAIN_PATCH
        ):
            s.attempts.fresh_starts_used -= 1
            workflow.logger.info("fresh start put off, looking again: %s", why)
            return LookAgain(why)
        return f"could not start the agent again: {why}"
    exit_code = s.spec.fresh_context_exit_code
    note_last_words(
        s, started.previous_output, f"context window full (exit {exit_code})", workflow.now()
    )
    s.process_id = started.process_id
    s.attempts.process_fresh_start = s.attempts.fresh_starts_used
    s.progress.last_progress_at = workflow.now()
    return None


async def after_wake(s: SupervisorState, woken: SandboxInfo, *, was_paused: bool) -> bool:
    """The agent runs on after the wake (the same process, or one started again in its
    place); False when it had to be started again and could not be."""
    if not (was_paused and woken.pause_ends_agents):
        return True
    if not workflow.patched(PAUSE_ENDS_AGENTS_PATCH):
        return True  # histories recorded before: the dead agent is seen as before
    assert s.sandbox_id is not None
    s.sandbox.pause_resumes += 1
    started = await outcomes.best_effort(
        sandbox.start_agent(
            s.spec,
            s.sandbox_id,
            s.attempt,
            s.attempts.process_fresh_start,
            s.process_id,
            resumed=s.sandbox.pause_resumes,
            route=host_steps.current_route(s),
        ),
        "start the agent again",
    )
    if started is None:
        return False
    workflow.logger.info("agent started again after its sandbox's pause ended it")
    s.process_id = started.process_id
    s.progress.last_progress_at = workflow.now()
    return True
