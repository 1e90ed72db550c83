"""AgentRun's cleanup steps: no sandbox of the run is left running on any way out.

Workflow code (activities through `calls`).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import calls
    from workflows.state import SupervisorState


async def sweep(s: SupervisorState, *, stop: bool, paused_too: bool, why: str) -> None:
    """Leave none of this run's sandboxes running; `paused_too` ends those kept for a look."""
    for box in await calls.list_sandboxes(s.spec):
        if box.sandbox_id == s.sandbox_id:
            continue
        if box.state in ("running", "starting") or (paused_too and box.state == "paused"):
            await calls.pause_or_stop(s.spec, box.sandbox_id, stop=stop, why=why)
