"""AgentRun's delivery: a run finishes only once its branch on the origin holds its work (and,
with `RunSpec.pull_request`, its pull request is open).

When the agent has exited 0 and its done checks passed, the workspace is committed as it
stands and pushed to the run's branch from the sandbox, and the worker sees the origin hold
that commit (`confirm_pushed`); then the branch's one pull request is opened or brought up to
date (`open_pull_request`); with `pull_request.until_checks_pass`, its checks watched until
they pass (workflows/ci_steps.py). Either that cannot be done (the origin refused past its retries,
GitHub refused) makes the run need a person, its sandbox paused where it stands with the work
in it, never stopped: any extension tries again from where it stopped (a push done is not done
twice). A sandbox gone before its work was pushed is a restart from the checkpoint.

Workflow code (the activities through `calls`); the decisions are in
`workflows.pure.delivery`. Runs begun before `FINISHED_PUSHED_PATCH` finish as they did.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows import ci_steps, host_steps, kit_request_steps, lease_steps
    from workflows.calls import delivery as delivery_calls
    from workflows.calls import outcomes
    from workflows.pure import ci, delivery, done, workspace
    from workflows.pure.decide import (
        Decision,
        Finish,
        NeedsAttention,
        restart_within_budget,
    )
    from workflows.pure.state import SupervisorState

Publish = Callable[[SupervisorState], None]

# A sandbox that is gone has nothing left to push: the run starts again from its checkpoint.
_GONE = ("SandboxGone", "SandboxNotFound")
# The lease a push needs left before it: the push's own limit in the sandbox (5 min,
# activities/workspace/work_push.py), to which the lease rule adds its margin
# (done.CHECK_LEASE_MARGIN).
PUSH_LEASE_SECONDS = 300


async def deliver(s: SupervisorState, publish: Publish) -> Decision | None:
    """The agent exited 0 and its checks passed (or a person extended a run whose delivery
    waits): `Finish` once the work is on the origin (and proposed, and its CI passed), else
    what follows (None: cancelled while it waited on CI)."""
    if not s.delivery.finish_pushes:
        return Finish()
    s.state = "finishing"
    publish(s)
    if s.delivery.pushed_commit is None:
        waits = await _push(s)
        if waits is not None:
            return waits
    if delivery.wants_pull_request(s) or ci.pull_request_behind(s):
        waits = await _pull_request(s)
        if waits is not None:
            return waits
    s.delivery.delivery_waits = None
    if ci_steps.watching(s):  # finished only once its pull request's checks pass
        return await ci_steps.watch(s, publish)
    return Finish()


async def _push(s: SupervisorState) -> Decision | None:
    """Push the work to the run's branch (None: the origin holds it)."""
    assert s.sandbox_id is not None
    if (
        s.sandbox.paused_in_place or s.sandbox.sandbox_paused
    ) and not await kit_request_steps.wake_in_place(
        s, "push the run's work to its branch", agent_ended=True
    ):
        return _waits(s, "push", "the sandbox holding it could not be woken for its push")
    target = done.check_lease_target(s.sandbox.lease_ends_at, PUSH_LEASE_SECONDS, workflow.now())
    if s.sandbox.lease_keeping and target is not None:
        await lease_steps.extend_lease(s, target, "push the run's work")
    if s.delivery.push_at is None:
        s.delivery.push_at = workflow.now()
    previous = s.done.done_commit or workspace.previous_commit(s)
    pushed = await outcomes.outcome(
        delivery_calls.confirm_pushed(s, host_steps.current_route(s), previous)
    )
    if isinstance(pushed, ActivityError):
        said = _said(pushed)
        if outcomes.error_type(pushed) in _GONE:
            s.delivery.delivery_waits, s.delivery.push_at = (
                None,
                None,
            )  # a new sandbox makes a commit of its own
            return restart_within_budget(s, said, workflow.now())
        workflow.logger.warning("the run's work was not pushed: %s", said)
        return _waits(s, "push", said)
    s.delivery.pushed_commit = pushed.commit
    workflow.logger.info("the run's work is on the origin: %s at %s", pushed.ref, pushed.commit)
    return None


async def _pull_request(s: SupervisorState) -> Decision | None:
    """Open or update the branch's pull request (None: it is open)."""
    assert s.delivery.pushed_commit is not None
    facts = delivery.run_facts(s, workflow.now())
    opened = await outcomes.outcome(
        delivery_calls.open_pull_request(s, s.delivery.pushed_commit, facts)
    )
    if isinstance(opened, ActivityError):
        said = _said(opened)
        workflow.logger.warning("no pull request: %s", said)
        return _waits(s, "pull_request", said)
    s.delivery.pull_request_url = opened.url
    s.delivery.pull_request_commit = s.delivery.pushed_commit
    return None


def _waits(s: SupervisorState, what: str, said: str) -> NeedsAttention:
    """A person is needed; the sandbox is paused where it stands (never stopped: the work
    may be only there), and an extension tries again (`delivery.DeliverAgain`)."""
    if what == "push":
        s.delivery.delivery_waits = "push"
        return NeedsAttention(delivery.push_reason(said), in_place=True)
    s.delivery.delivery_waits = "pull_request"
    return NeedsAttention(delivery.pull_request_reason(said), in_place=True)


def _said(err: ActivityError) -> str:
    """What the activity said (its message, without its error type), or how it ended."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.message:
        return cause.message
    return outcomes.describe(err)
