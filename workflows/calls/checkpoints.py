"""The checkpoint's copy off the sandbox (activities/sandbox/activities.py `read_checkpoint`), and
what the copy brings with it: the kit's requests file, the agent's last words, its session."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from overnight.core.provider_traits import traits

with workflow.unsafe.imports_passed_through():
    from activities.models import ActivityName, CheckpointSalvage, ReadCheckpointInput
    from overnight.core.agent_requests import requests_path
    from overnight.core.models import RunSpec
    from workflows import policies
    from workflows.calls.outcomes import best_effort
    from workflows.calls.routing import given_up, on_host
    from workflows.pure.hosts import ANY_WORKER, Route
    from workflows.pure.state import SupervisorState


async def read_checkpoint(
    spec: RunSpec,
    sandbox_id: str,
    known_digest: str | None,
    why: str,
    *,
    wake_paused: bool = False,
    output_of: str | None = None,
    requests_path: str | None = None,
    known_requests_digest: str | None = None,
    route: Route = ANY_WORKER,
    timeout: timedelta = policies.ACTION_TIMEOUT,
) -> CheckpointSalvage | None:
    """The checkpoint if it changed; None when unchanged or unreadable (best effort).
    `wake_paused`: the sandbox is paused (at its lease end): wake it to salvage the file.
    `output_of`: the agent process whose last words to bring back too. `requests_path`: the
    kit's requests file to read too (runs that read it; see `requests_path_of`)."""
    if given_up(route, f"copy checkpoint ({why})"):
        return None
    read: CheckpointSalvage | None = await best_effort(
        on_host(
            route,
            ActivityName.READ_CHECKPOINT,
            ReadCheckpointInput(
                provider=spec.provider,
                sandbox_id=sandbox_id,
                checkpoint_path=spec.checkpoint_path,
                max_bytes=spec.max_checkpoint_bytes,
                known_digest=known_digest,
                wake_paused=wake_paused,
                output_of=output_of,
                secret_env=list(spec.secret_env),
                requests_path=requests_path,
                known_requests_digest=known_requests_digest,
                session_store_of=session_store_of(spec),
            ),
            result_type=CheckpointSalvage,
            **policies.checkpoint_read(timeout).options(),
            summary=f"copy checkpoint ({why})",
        ),
        f"copy the checkpoint ({why})",
    )
    return read


def session_store_of(spec: RunSpec) -> str | None:
    """A coding agent on Runtime has its session carried to the worker's store after each
    checkpoint (no mount there). Such runs were refused before, so no history differs."""
    carried = spec.agent is not None and not traits(spec.provider).mounts_worker_folders
    return spec.run_id if carried else None


def requests_path_of(s: SupervisorState) -> str | None:
    """The kit's requests file beside the checkpoint, for runs that read it (else None)."""
    return requests_path(s.spec.checkpoint_path) if s.kit.requests_file else None
