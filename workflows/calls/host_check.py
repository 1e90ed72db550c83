"""Whether a host's queue is polled (activities/admission/host_check.py), asked when a step there
waited unstarted; the answer decides whether the host is taken as lost (`workflows.pure.hosts`)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import ActivityName
    from activities.models.host import HostCheckInput, HostSeen
    from workflows import policies
    from workflows.calls.outcomes import best_effort


async def check_host(host_queue: str) -> HostSeen | None:
    """What the server says of a host queue's pollers, asked on the run's own queue (any
    worker answers); None when it could not be asked (the host is then not taken as lost)."""
    seen: HostSeen | None = await best_effort(
        workflow.execute_activity(
            ActivityName.CHECK_HOST,
            HostCheckInput(host_queue=host_queue),
            result_type=HostSeen,
            **policies.HOST_CHECK.options(),
            summary=f"is host queue {host_queue} polled? (a step there waited unstarted)",
        ),
        f"check host queue {host_queue}",
    )
    return seen
