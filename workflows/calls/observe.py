"""The long poll of the agent (activities/sandbox/activities.py `observe_agent`) and its time
limits: a look that ends at the stall deadline keeps that deadline even when the worker watching
dies."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError, TimeoutType

with workflow.unsafe.imports_passed_through():
    from activities.models import ActivityName, Observation, ObserveInput
    from workflows import policies
    from workflows.calls.checkpoints import requests_path_of, session_store_of
    from workflows.calls.routing import routed
    from workflows.patches import DEADLINE_LOOK_BOUNDED_PATCH
    from workflows.pure import model_books, money
    from workflows.pure.hosts import ANY_WORKER, Route
    from workflows.pure.state import SupervisorState


def start_observe(
    s: SupervisorState, wait: float, *, at_deadline: bool = False, route: Route = ANY_WORKER
) -> workflow.ActivityHandle[Observation]:
    """One long poll of the current agent, at most `wait` seconds (started, not awaited: a
    signal may interrupt it). `at_deadline`: the wait ends at a deadline that must be kept
    even if the worker watching dies (the stall), so the attempt times out soon after it."""
    assert s.sandbox_id is not None and s.process_id is not None
    spec = s.spec
    return workflow.start_activity(
        ActivityName.OBSERVE_AGENT,
        ObserveInput(
            provider=spec.provider,
            sandbox_id=s.sandbox_id,
            process_id=s.process_id,
            checkpoint_path=spec.checkpoint_path,
            max_checkpoint_bytes=spec.max_checkpoint_bytes,
            known_digest=s.progress.seen_digest,
            wait_seconds=wait,
            check_interval_seconds=min(spec.poll_seconds, 1.0),
            watch_token=s.sandbox.watch_token,
            report_every_seconds=spec.poll_seconds,
            read_money=money.money_due(s, workflow.now()),
            secret_env=list(spec.secret_env),
            requests_path=requests_path_of(s),
            known_requests_digest=s.kit.requests_digest,
            session_store_of=session_store_of(spec),
            model_books_of=spec.run_id if s.money.gateway_metered else None,
            known_model_books=model_books.known(s),
        ),
        result_type=Observation,
        summary=f"watch agent in sandbox {s.attempt}",
        **policies.observe(
            wait,
            poll_seconds=spec.poll_seconds,
            at_deadline=at_deadline,
            bounded=deadline_look_bounded(at_deadline),
        ).options(),
        **routed(route),
    )


def deadline_look_bounded(at_deadline: bool) -> bool:
    """Whether a look ending at the stall deadline has a whole-look time limit (runs that
    meet DEADLINE_LOOK_BOUNDED_PATCH)."""
    return at_deadline and workflow.patched(DEADLINE_LOOK_BOUNDED_PATCH)


def lost_at_deadline(err: ActivityError) -> bool:
    """A look with a whole-look time limit ended without an answer for want of time: it ran
    out (its worker, or its retry's, died), or its last try failed with a fault a retry could
    have cleared when no time was left for one (an API storm). Nothing is known of the agent:
    look again. A fault no retry clears is not this."""
    cause = err.cause
    if isinstance(cause, TimeoutError):
        return cause.type == TimeoutType.SCHEDULE_TO_CLOSE
    if isinstance(cause, ApplicationError):
        return not cause.non_retryable and cause.type not in policies.NON_RETRYABLE_TYPES
    return False
