"""AgentRun's last step, finished or cancelled: the final checkpoint salvaged, the current
sandbox stopped (or kept paused), the run's other sandboxes and stores swept, a person told,
and the run's result.

Workflow code (activities through the steps it names).
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from overnight.core.models import RunResult
    from workflows import end_steps, money_steps, set_aside_steps, snapshot_steps
    from workflows.look_steps import Looks
    from workflows.notify_steps import Notifier
    from workflows.pure import delivery
    from workflows.pure.run_record import run_result
    from workflows.pure.state import SupervisorState


async def end(
    s: SupervisorState,
    outcome: str,
    looks: Looks,
    publish: Callable[[SupervisorState], None],
    notifier: Notifier,
) -> RunResult:
    """`outcome`: `finished` or `cancelled`."""
    s.state = "finishing"
    publish(s)
    why = "run finished" if outcome == "finished" else f"run cancelled: {s.cancel_reason}"
    ended = "finished (exit 0)" if outcome == "finished" else f"cancelled: {s.cancel_reason}"
    keep = s.spec.keep_sandboxes
    if s.sandbox_id is not None:
        await set_aside_steps.salvage_checkpoint(s, looks, why, ended)
        if delivery.work_only_in_sandbox(s):
            # Cancelled while its work waits for the origin: its sandbox is kept paused,
            # as a failed attempt's is (for `keep_failed_days`), never stopped.
            await money_steps.end_sandbox(s, stop=False, why=f"{why}; its work is only here")
            s.sandbox.paused_sandboxes.append(s.sandbox_id)
            s.sandbox_id = None
        else:
            await money_steps.end_sandbox(s, stop=not keep, why=why)
    await end_steps.sweep_at_end(s, why=why)
    if not keep:
        await snapshot_steps.delete_all(s, why)
    s.state = "finished" if outcome == "finished" else "cancelled"
    s.process_id = None
    publish(s)
    if outcome == "finished":
        notifier.tell(s, "finished", f"finished after {s.attempt} attempt(s)")
    else:
        notifier.tell(s, "cancelled", s.cancel_reason or "cancelled")
    await notifier.settle()
    return run_result(s, workflow.now())
