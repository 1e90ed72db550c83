"""AgentRun's lease steps: extend a progressing sandbox's lease, wake one paused at its end.

Workflow code (activities through `calls`); the decisions themselves are in `workflows.pure.lease`.
"""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import host_steps, metrics
    from workflows.calls import sandbox_lifecycle
    from workflows.pure import budget, money
    from workflows.pure.state import SupervisorState
    from workflows.same_sandbox_steps import after_wake


async def extend_lease(s: SupervisorState, until: datetime, why: str = "agent progressing") -> None:
    assert s.sandbox_id is not None
    # Marked first: a failed extension is not retried on every look (the lease then ends, the
    # sandbox pauses, and the run wakes it).
    s.sandbox.lease_extended_at = workflow.now()
    # Past the key's daily spending limit the extension is refused: the lease then ends, the
    # sandbox pauses, and waking it waits for the daily window.
    rate = budget.micros_per_second(s.spec) if money.keeps_account(s) else None
    info = await sandbox_lifecycle.extend_sandbox(
        s.spec,
        s.sandbox_id,
        until,
        why,
        micros_per_second=rate,
        route=host_steps.current_route(s),
    )
    if isinstance(info, sandbox_lifecycle.DailyLimitRefused):
        metrics.lease_extension("refused")
        workflow.logger.warning("lease not extended: %s", info.text)
        return
    metrics.lease_extension("failed" if info is None else "extended")
    if info is not None and info.lease_ends_at is not None:
        s.sandbox.lease_ends_at = info.lease_ends_at


async def wake_after_lease(s: SupervisorState, paused_at: datetime) -> bool | str:
    """Wake the sandbox with a fresh lease; False when it could not be woken, and the reason
    when the key's daily spending limit refused the fresh lease (the sandbox stays paused)."""
    assert s.sandbox_id is not None
    room = money.next_lease_micros(s) if money.keeps_account(s) else None
    info = await sandbox_lifecycle.wake_sandbox(
        s.spec,
        s.sandbox_id,
        "lease ended, agent progressing",
        daily_room_micros=room,
        route=host_steps.current_route(s),
    )
    if isinstance(info, sandbox_lifecycle.DailyLimitRefused):
        metrics.lease_end_wake("refused")
        return info.text
    if info is None or info.state != "running":
        metrics.lease_end_wake("failed")
        return False
    metrics.lease_end_wake("woken")
    now = workflow.now()
    # Frozen time is neither the agent's stall nor compute spend.
    if s.progress.last_progress_at is not None:
        s.progress.last_progress_at = min(now, s.progress.last_progress_at + (now - paused_at))
    budget.close_sandbox_spend(s, paused_at)
    s.sandbox.sandbox_started_at = now
    s.sandbox.lease_ends_at = info.lease_ends_at
    s.sandbox.lease_extended_at = now
    s.sandbox.sandbox_paused = False
    s.sandbox.lease_resumes += 1
    workflow.logger.info("sandbox %s woken after its lease end", s.sandbox_id)
    return await after_wake(s, info, was_paused=True)
