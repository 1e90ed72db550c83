"""A finished run's delivery: its work pushed to its branch and seen there by the worker
(activities/delivery/branch_push.py, on the sandbox's host), and its pull request opened or brought
up to date (activities/delivery/pull_request.py, on any worker: the token is every worker's)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import ActivityName
    from activities.models.delivery import (
        BranchPushed,
        ConfirmPushedInput,
        OpenPullRequestInput,
        PullRequestOpened,
        RunFacts,
    )
    from workflows import policies
    from workflows.calls.routing import on_host
    from workflows.pure.hosts import Route
    from workflows.pure.state import SupervisorState


async def confirm_pushed(s: SupervisorState, route: Route, previous: str | None) -> BranchPushed:
    """Push the work of the current sandbox to the run's branch; raises `ActivityError` when
    it could not be (its cause says why: `PushRefused`, `PushFailed`, `SandboxGone`, ...)."""
    assert s.sandbox_id is not None and s.delivery.push_at is not None
    pushed: BranchPushed = await on_host(
        route,
        ActivityName.CONFIRM_PUSHED,
        ConfirmPushedInput(
            spec=s.spec, sandbox_id=s.sandbox_id, at=s.delivery.push_at, previous=previous
        ),
        result_type=BranchPushed,
        **policies.CONFIRM_PUSHED.options(),
        summary=f"push the run's work to {s.spec.branch} (sandbox {s.attempt})",
    )
    return pushed


async def open_pull_request(s: SupervisorState, commit: str, facts: RunFacts) -> PullRequestOpened:
    """Open (or update) the branch's pull request; raises `ActivityError` when it could not
    be (`PullRequestRefused`, or GitHub out of reach past the retries)."""
    assert s.spec.pull_request is not None
    opened: PullRequestOpened = await workflow.execute_activity(
        ActivityName.OPEN_PULL_REQUEST,
        OpenPullRequestInput(spec=s.spec, commit=commit, facts=facts),
        result_type=PullRequestOpened,
        **policies.OPEN_PULL_REQUEST.options(),
        summary=f"open the pull request of {s.spec.branch} into {s.spec.pull_request.base}",
    )
    return opened
