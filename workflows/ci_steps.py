"""AgentRun's CI rounds (`pull_request.until_checks_pass`): once its pull request is open, the
run waits on the checks GitHub reports on the pushed commit, then finishes, or starts its agent
again in its sandbox (the same CLI session) with the failing check, within
`Budget.max_ci_rounds`.

While it waits the run holds no running sandbox (paused where it stands, the agent's session
and work in it) and no admission place (given back at once, asked for again before the
sandbox wakes). The watch is `watch_checks` windows (activities/delivery/ci_checks.py: ETag polls),
ended at once by a cancel.

Workflow code (the activities through `calls`); the decisions are in `workflows.pure.ci`.
Behind `CI_ROUNDS_PATCH`, asked only by runs whose pull request asks for CI rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.models.delivery import ChecksSeen
    from workflows import admission_steps, host_steps, kit_request_steps, policies
    from workflows.calls import ci as ci_calls
    from workflows.calls import outcomes, sandbox
    from workflows.patches import CI_ROUNDS_PATCH
    from workflows.pure import ci
    from workflows.pure.decide import Decision, Finish, NeedsAttention
    from workflows.pure.run_record import note_started_again
    from workflows.pure.state import SupervisorState

Publish = Callable[[SupervisorState], None]
CiRound = ci.CiRound


def watching(s: SupervisorState) -> bool:
    """The run's finish waits on its pull request's CI (asked once, at its first watch)."""
    if not ci.wanted(s):
        return False
    if s.ci.ci_watching is None:
        s.ci.ci_watching = workflow.patched(CI_ROUNDS_PATCH)
    return s.ci.ci_watching


async def watch(s: SupervisorState, publish: Publish) -> Decision | None:
    """The pull request is open on the pushed commit: `Finish` once its checks pass, a
    `CiRound`, or a person needed (None: cancelled meanwhile)."""
    if not watching(s):
        return Finish()
    s.delivery.delivery_waits = None
    if s.ci.ci_told is not None:  # a failure waited for a person, who extended the run
        waited = ci.verdict(s, workflow.now())
        assert waited is not None
        return _decided(s, waited)
    await _step_aside(s)
    ci.begin_watch(s, workflow.now())
    publish(s)
    assert s.delivery.pushed_commit is not None
    while True:
        began = workflow.now()
        wait = ci.window_seconds(s, began, policies.WATCH_CHECKS_WINDOW)
        seen = await _look(s, s.delivery.pushed_commit, wait)
        if seen is None:
            ci.end_watch(s, workflow.now())
            return None
        if isinstance(seen, ActivityError):
            ci.end_watch(s, workflow.now())
            return _person(s, _said(seen))
        after = ci.after_look(s, seen, workflow.now())
        publish(s)
        if after is None:
            await _rest_of_window(s, began + timedelta(seconds=wait))
            continue
        ci.end_watch(s, workflow.now())
        if isinstance(after, ci.Passed):
            workflow.logger.info("the pull request's checks passed on %s", seen.commit)
            return Finish()
        return _decided(s, after)


async def _rest_of_window(s: SupervisorState, ends: datetime) -> None:
    """A watch back early with the checks still pending (its worker's clock, a retry): the
    rest of its window is waited out on a timer, so a run never polls in a tight loop."""
    rest = ends - workflow.now()
    if rest <= timedelta(seconds=1):
        return
    try:
        await workflow.wait_condition(
            lambda: s.cancel_requested, timeout=rest, timeout_summary="CI checks pending"
        )
    except TimeoutError:
        pass


async def _look(s: SupervisorState, commit: str, wait: float) -> ChecksSeen | ActivityError | None:
    """One watch window: what it saw, why it could not look, or None when cancelled."""
    handle = ci_calls.start_watch(s, commit, wait, ci.poll_seconds(s))
    await workflow.wait_condition(lambda: handle.done() or s.cancel_requested)
    if s.cancel_requested:
        handle.cancel()
        # Its end (the cancellation) is nobody's news: read, so it is not logged as lost.
        handle.add_done_callback(lambda done: done.cancelled() or done.exception())
        return None
    try:
        return handle.result()
    except ActivityError as err:
        outcomes.reraise_cancellation(err)
        return err


async def start_again(s: SupervisorState, decision: CiRound, publish: Publish) -> str | None:
    """Start the agent again in its sandbox (the same session: the adapter resumes it) told
    the failing check; why a restart from the checkpoint is needed instead when it could not
    be (None: it runs, or the run was cancelled while it queued for its place)."""
    assert s.sandbox_id is not None
    if not await admission_steps.back_in(s, publish):
        return None
    if (
        s.sandbox.paused_in_place or s.sandbox.sandbox_paused
    ) and not await kit_request_steps.wake_in_place(
        s, "a CI check failed: the agent starts again on it", agent_ended=True
    ):
        return "sandbox paused while CI ran could not be woken"
    ci.started_again(s)
    ended = s.process_id
    started = await outcomes.outcome(
        sandbox.start_agent(
            s.spec,
            s.sandbox_id,
            s.attempt,
            s.attempts.process_fresh_start,
            ended,
            ci_round=s.ci.ci_rounds_used,
            ci_reason=decision.reason,
            told=decision.told,
            route=host_steps.current_route(s),
        )
    )
    if isinstance(started, ActivityError):
        return f"could not start the agent again for its CI check: {outcomes.describe(started)}"
    note_started_again(s, started, decision.reason, workflow.now())
    workflow.logger.info("agent started again: %s", decision.reason)
    return None


async def _step_aside(s: SupervisorState) -> None:
    """Pause the sandbox where it stands (the agent has ended; its session and work stay in
    it) and give the admission place back while CI runs."""
    if s.sandbox_id is not None and not s.sandbox.sandbox_paused:
        await kit_request_steps.pause_in_place(s, "its pull request's CI runs")
    if s.sandbox.sandbox_paused:
        await admission_steps.step_out(s)


def _decided(s: SupervisorState, verdict: CiRound | str) -> Decision:
    return verdict if isinstance(verdict, CiRound) else _person(s, verdict)


def _person(s: SupervisorState, reason: str) -> NeedsAttention:
    """A person decides; any extension acts on CI again (`delivery.DeliverAgain`)."""
    s.delivery.delivery_waits = "checks"
    return NeedsAttention(reason, in_place=True)


def _said(err: ActivityError) -> str:
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.message:
        return cause.message
    return outcomes.describe(err)
