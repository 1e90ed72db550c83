"""AgentRun's looks at its agent: the long poll (the observe activity) that returns as soon as
the agent exits, its sandbox stops, or its checkpoint changes; what a look brought taken into
the run's state; and the quiet wait until the next look.

Workflow code (the activity through `calls`). `Looks` holds what the loop keeps between its
looks on this worker only: a continue-as-new starts it afresh (nothing of it is carried).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.models import CheckpointRead, Observation
    from workflows import host_steps, workspace_steps
    from workflows.calls import observe, outcomes, routing
    from workflows.patches import BOOKS_ARE_NEWS_PATCH, PROGRESS_MARK_PATCH
    from workflows.pure import model_books, money
    from workflows.pure.decide import (
        HostLost,
        Look,
        ObserveFailed,
        Watch,
        is_quiet,
        next_wake,
        stall_deadline_of,
    )
    from workflows.pure.egress import take_refusals
    from workflows.pure.hosts import Route
    from workflows.pure.run_record import take_checkpoint, take_requests_file
    from workflows.pure.state import SupervisorState

# Quiet observations that come back this much before their deadline are waited out on a timer.
EARLY_RETURN_SLACK = timedelta(seconds=1)
# Looks at the stall deadline that may run out of time in a row (workers dying, about 10 s
# each) before the sandbox is taken as no longer answering: about as long as a plain look's
# retries take to give up (policies.OBSERVE_RETRY).
DEADLINE_LOOKS_LOST_AT_MOST = 30


def interrupted(s: SupervisorState) -> bool:
    """A message the loop acts on at once: a cancel, or a rewind."""
    return s.cancel_requested or s.workspace.rewind_to is not None


class Looks:
    """The loop's looks, and what it keeps between them."""

    def __init__(self) -> None:
        # The next look's end when a step set it (a `Watch`); None: `next_wake` sets it.
        self.watch_until: datetime | None = None
        self.deadline_looks_lost = 0  # in a row (`_deadline_look_lost`)
        self.books_news = False  # the last look brought grown gateway books

    async def observe(self, s: SupervisorState) -> Look | None:
        """One long poll; None when a signal interrupted it (or its host's queue kept it
        waiting, its host not lost: look again)."""
        assert s.sandbox_id is not None and s.process_id is not None
        now = workflow.now()
        until = self.watch_until or next_wake(s, now)
        wait = max(0.0, (until - now).total_seconds())
        stall = stall_deadline_of(s)
        at_deadline = stall is not None and until >= stall
        route = host_steps.current_route(s)
        handle = observe.start_observe(s, wait, at_deadline=at_deadline, route=route)
        try:
            await workflow.wait_condition(lambda: handle.done() or interrupted(s))
        finally:
            if not handle.done():
                handle.cancel()
                # Its end (the cancellation) is nobody's news: read, so it is not logged as lost.
                handle.add_done_callback(lambda done: done.cancelled() or done.exception())
        if interrupted(s):
            return None
        try:
            seen: Observation = handle.result()
        except ActivityError as err:
            outcomes.reraise_cancellation(err)
            if outcomes.handed_over(err):
                return None  # its last attempt ended with its worker's shutdown: look again
            if observe.deadline_look_bounded(at_deadline) and observe.lost_at_deadline(err):
                return await self._deadline_look_lost(s, route, err)
            if route.task_queue is not None and routing.waited_unstarted(err):
                # No worker of its host took it: a restart there costs nothing, a lost host
                # costs the work since the checkpoint.
                lost = await host_steps.host_lost(s, route.task_queue)
                return None if lost is None else HostLost(lost)
            return ObserveFailed(outcomes.describe(err))
        self.deadline_looks_lost = 0
        host_steps.host_seen(s, route.task_queue)
        self.take_checkpoint(s, seen.checkpoint)
        running = seen.sandbox_state == "running"
        await workspace_steps.keep_if_changed(s, running=running, hold=running)
        if take_requests_file(s, seen.requests):
            self.watch_until = None
        money.take_money(s, seen.money, workflow.now())
        take_refusals(s, s.sandbox_id, seen.egress_refused)
        self.books_news = model_books.news(s, seen.gateway_books)
        model_books.take_books(s, seen.gateway_books)
        s.sandbox.watch_token = seen.watch_token
        s.sandbox.sandbox_paused = seen.sandbox_state == "paused"
        # A paused sandbox's reported end is judged beside the run's record (lease.lease_ended),
        # not over it; a wake brings the fresh lease's end.
        paused_kept = s.sandbox.lease_end_either and seen.sandbox_state == "paused"
        if seen.lease_ends_at is not None and not paused_kept:
            s.sandbox.lease_ends_at = seen.lease_ends_at
        return seen

    async def _deadline_look_lost(
        self, s: SupervisorState, route: Route, err: ActivityError
    ) -> Look | None:
        """The look ending at the stall deadline ran out of time (its worker died, or its
        retry's): look again now, briefly, rather than wait out a retry's timeouts. Only a
        sandbox that stays silent for `DEADLINE_LOOKS_LOST_AT_MOST` such looks in a row is
        taken as no longer answering; one whose host's queue went unpolled, as lost."""
        self.deadline_looks_lost += 1
        if route.task_queue is not None:
            lost = await host_steps.host_lost(s, route.task_queue)
            if lost is not None:
                return HostLost(lost)
        if self.deadline_looks_lost >= DEADLINE_LOOKS_LOST_AT_MOST:
            return ObserveFailed(outcomes.describe(err))
        return None

    def quiet(self, seen: Look) -> bool:
        """A look that saw nothing new. Grown gateway books are news: the look came back early
        for them, and the agent may exit right after its model call (a CLI's last answer)."""
        if not is_quiet(seen):
            return False
        return not (self.books_news and workflow.patched(BOOKS_ARE_NEWS_PATCH))

    async def watch(self, s: SupervisorState, decision: Watch, *, quiet: bool) -> None:
        self.watch_until = decision.until
        early = decision.until - workflow.now()
        if quiet and early > EARLY_RETURN_SLACK:
            # The look came back early with nothing new: wait out the rest durably.
            try:
                await workflow.wait_condition(
                    lambda: interrupted(s),
                    timeout=early,
                    timeout_summary="quiet agent: next look",
                )
            except TimeoutError:
                pass
            self.watch_until = None

    def take_checkpoint(self, s: SupervisorState, read: CheckpointRead | None) -> None:
        taken, refused = take_checkpoint(
            s, read, workflow.now(), by_progress_mark=lambda: workflow.patched(PROGRESS_MARK_PATCH)
        )
        if refused:
            workflow.logger.warning("checkpoint not taken: %s", refused)
        if taken:
            self.watch_until = None
