"""AgentRun's cleanup steps: no sandbox of the run is left running on any way out, the
sandboxes of failed attempts are kept for a look for `keep_failed_days` after the run's end,
and what the run kept on its hosts beside them (a coding agent's session store) is freed.

Workflow code (activities through `calls`).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import SandboxInfo
    from overnight.core import retention
    from overnight.core.runtime_model_key import runtime_key_plan
    from workflows import admission_steps, host_steps
    from workflows.calls import sandbox_lifecycle
    from workflows.patches import (
        KEEP_WOKEN_ASIDE_PATCH,
        RETENTION_PATCH,
        RUN_STORE_FREED_PATCH,
        RUNTIME_KEY_FREED_PATCH,
    )
    from workflows.pure.hosts import Route
    from workflows.pure.state import SupervisorState


async def sweep(s: SupervisorState, *, stop: bool, paused_too: bool, why: str) -> None:
    """Leave none of this run's sandboxes running; `paused_too` ends those kept for a look."""
    for box, route in await _listed(s):
        if box.sandbox_id == s.sandbox_id:
            continue
        if box.state in ("running", "starting") or (paused_too and box.state == "paused"):
            await sandbox_lifecycle.pause_or_stop(
                s.spec, box.sandbox_id, stop=stop, why=why, route=route
            )


async def _listed(s: SupervisorState) -> list[tuple[SandboxInfo, Route]]:
    """The run's sandboxes on every host it used (one listing each), with their routes."""
    found = []
    for where in host_steps.sweep_routes(s):
        for box in await sandbox_lifecycle.list_sandboxes(s.spec, route=where):
            found.append((box, host_steps.box_route(s, box.sandbox_id, where)))
    return found


async def sweep_at_end(s: SupervisorState, *, why: str) -> None:
    """At the run's end: its sandboxes swept (`sweep_ended`), then its place in the pool
    given back (admission), so a pool never holds more sandboxes than places."""
    await sweep_ended(s, why=why)
    await free_stores(s, why=why)
    await admission_steps.give_back(s)


async def free_stores(s: SupervisorState, *, why: str) -> None:
    """A coding agent's run frees its session store on each host it used, its sandboxes
    ended: nothing resumes its session after the run (runs that end before
    `RUN_STORE_FREED_PATCH` leave it to `overnight reap`). The same step erases a run's model
    key held by Runtime, for an agent of one's own too (`RUNTIME_KEY_FREED_PATCH`)."""
    if s.spec.agent is None:
        if runtime_key_plan(s.spec) is None or not workflow.patched(RUNTIME_KEY_FREED_PATCH):
            return
    elif not workflow.patched(RUN_STORE_FREED_PATCH):
        return
    for where in host_steps.sweep_routes(s):
        await sandbox_lifecycle.free_run_store(s.spec, why, route=where)


async def sweep_ended(s: SupervisorState, *, why: str) -> None:
    """At the run's end (finished, cancelled either way), its current sandbox already ended:

    - `keep_sandboxes`: every sandbox is left paused, unlabelled: kept until a person deletes
      it (`overnight reap --paused`), as the spec asked;
    - otherwise any other sandbox still running (a half-made one) is stopped, and those of
      failed attempts, paused when their attempt ended, stay paused until the retention ends,
      labelled so (`overnight reap` deletes them then); with `keep_failed_days` 0 they are
      stopped. A cancelled run keeps them too: cancelling ends the work, not the evidence of
      why it went wrong, and they cost storage only. One of those found running (a read woke
      it since) is paused and kept the same.

    Runs that ended before `RETENTION_PATCH` stopped them all (their histories replay so)."""
    keep = s.spec.keep_sandboxes
    if keep or not workflow.patched(RETENTION_PATCH):
        await sweep(s, stop=not keep, paused_too=not keep, why=why)
        return
    days = s.spec.keep_failed_days
    until = retention.keep_until(workflow.now(), days) if days > 0 else None
    for box, route in await _listed(s):
        if box.sandbox_id == s.sandbox_id or box.state not in ("running", "starting", "paused"):
            continue
        set_aside = box.state == "paused" or (
            box.sandbox_id in s.sandbox.paused_sandboxes
            and workflow.patched(KEEP_WOKEN_ASIDE_PATCH)
        )
        if set_aside and until is not None:
            kept = f"{why}; kept for a look for {days} day(s)"
            paused = await sandbox_lifecycle.pause_or_stop(
                s.spec, box.sandbox_id, stop=False, why=kept, keep_until=until, route=route
            )
            # One that runs and cannot be paused (its set-aside pause may have failed too)
            # is stopped: nothing of the run is left running.
            if paused is not None or box.state == "paused":
                continue
        await sandbox_lifecycle.pause_or_stop(
            s.spec, box.sandbox_id, stop=True, why=why, route=route
        )
