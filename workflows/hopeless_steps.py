"""AgentRun failing at once on what no retry fixes (workflows/pure/hopeless.py decides what
that is):
its sandboxes swept as at any end (a half-made one stopped, one set aside kept for a look), its
admission place given back, a person told, and the run failed with the one line.

Workflow code (activities through `end_steps` and `calls`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows import end_steps
    from workflows.notify_steps import Notifier
    from workflows.pure import hopeless
    from workflows.pure.hopeless import FailRun, failure_text
    from workflows.pure.state import SupervisorState


def after_create_failed(s: SupervisorState, err: ActivityError) -> FailRun | None:
    """`hopeless.after_create_failed` for the create's error: its type, and its message as the
    activity wrote it (no `Type: ` before it)."""
    cause = err.cause
    if not isinstance(cause, ApplicationError):
        return None
    return hopeless.after_create_failed(s, cause.type, cause.message)


async def fail_run(
    s: SupervisorState,
    failed: FailRun,
    publish: Callable[[SupervisorState], None],
    notifier: Notifier,
) -> NoReturn:
    line = failure_text(s, failed)
    workflow.logger.warning("run failed: %s", line)
    await end_steps.sweep_at_end(s, why="run failed: no retry can fix it")
    s.state = "failed"
    s.failure = line
    s.process_id = None
    publish(s)
    notifier.tell(s, "failed", line)
    await notifier.settle()
    raise ApplicationError(line, type=failed.error_type, non_retryable=True)
