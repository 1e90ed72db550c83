"""Never restarting, as stalled, an agent that did progress.

A look (the observe activity) ends at the stall deadline by itself, but its worker may die
under it, and its retry starts only after a timeout, past the deadline, with nothing left to
wait: such a retry may not see a checkpoint written in between (chaos runs saw it: a healthy
agent restarted as stalled). So before a stall restart the run reads the checkpoint once more
(`progress_read`): progress read then disproves the stall, and the run goes on watching the
same agent. One read per stall, nothing on the way of a healthy run.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import host_steps, policies
    from workflows.calls import checkpoints
    from workflows.patches import PROGRESS_MARK_PATCH, STALL_CONFIRMED_PATCH
    from workflows.pure.run_record import take_checkpoint, take_requests_file
    from workflows.pure.state import SupervisorState


async def progress_read(s: SupervisorState) -> bool:
    """Before a stall restart: whether the checkpoint (or the kit's requests) moved on since
    the run last saw it (then taken, and the stall is no stall: look again). A paused sandbox
    is not woken: the read must change nothing."""
    if s.sandbox_id is None or not workflow.patched(STALL_CONFIRMED_PATCH):
        return False
    before = s.progress.last_progress_at
    read = await checkpoints.read_checkpoint(
        s.spec,
        s.sandbox_id,
        s.progress.seen_digest,
        "is the agent stalled? a last look at its checkpoint",
        requests_path=checkpoints.requests_path_of(s),
        known_requests_digest=s.kit.requests_digest,
        route=host_steps.current_route(s),
        timeout=policies.STALL_READ_TIMEOUT,
    )
    taken, refused = take_checkpoint(
        s, read, workflow.now(), by_progress_mark=lambda: workflow.patched(PROGRESS_MARK_PATCH)
    )
    if refused:
        workflow.logger.warning("checkpoint not taken: %s", refused)
    asked = read is not None and take_requests_file(s, read.requests)
    return asked or (taken and s.progress.last_progress_at != before)
