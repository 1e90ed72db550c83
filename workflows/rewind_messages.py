"""AgentRun's `rewind` update: the run goes on from a kept checkpoint and its workspace.

Workflow code: `AgentRun` inherits the handler beside `RunMessages`'. The validator refuses,
with a reason and before anything enters history, a run that keeps no workspace, one not
running, and a checkpoint it has no kept workspace for; the loop carries the rewind out
(workflows/workspace_steps.py).
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from overnight.core.workspace_spec import rewind_refusal
    from workflows.pure.state import SupervisorState

REWIND_UPDATE = "rewind"


class RewindMessages:
    _s: SupervisorState | None

    # A plain number, so the stock `temporal workflow update execute --name rewind --input 2`
    # works too.
    @workflow.update(name=REWIND_UPDATE)
    def rewind(self, to: Any) -> str:
        assert self._s is not None
        self._s.workspace.rewind_to = int(to)
        return f"rewinding to checkpoint {to}: a new sandbox from its workspace and checkpoint"

    @rewind.validator
    def _validate_rewind(self, to: Any) -> None:
        s = self._s
        if s is None:
            raise ValueError("the run has not started yet")
        if isinstance(to, bool) or not isinstance(to, int) or to < 1:
            raise ValueError("the checkpoint to rewind to is a whole number, 1 or more")
        keeping = s.spec.keep_workspace and s.workspace.workspace_keeping is not False
        pending = s.workspace.rewind_to is not None or s.workspace.rewinding is not None
        refusal = rewind_refusal(keeping, s.state, s.workspace.workspace_kept, to, pending)
        if refusal is not None:
            raise ValueError(refusal)
