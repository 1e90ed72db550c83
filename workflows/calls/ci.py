"""A pull request's CI, watched (activities/delivery/ci_checks.py, on any worker: the token is every
worker's). Started, not awaited: a `cancel` signal must be able to end the watch at once."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import ActivityName
    from activities.models.delivery import ChecksSeen, WatchChecksInput
    from workflows import policies
    from workflows.pure.state import SupervisorState


def start_watch(
    s: SupervisorState, commit: str, wait_seconds: float, poll_seconds: float
) -> workflow.ActivityHandle[ChecksSeen]:
    """Watch the checks of `commit` for up to `wait_seconds` (back as soon as they are no
    longer pending); its `ActivityError` says why they could not be read."""
    return workflow.start_activity(
        ActivityName.WATCH_CHECKS,
        WatchChecksInput(
            spec=s.spec, commit=commit, wait_seconds=wait_seconds, poll_seconds=poll_seconds
        ),
        result_type=ChecksSeen,
        **policies.WATCH_CHECKS.options(),
        summary=f"watch the CI checks of {commit[:12]} (round {s.ci.ci_rounds_used})",
    )
