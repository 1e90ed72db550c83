"""Timeouts and retry policies of AgentRun's activities, in one place.

Transient provider faults (network drops, 5xx, 429, overload) are absorbed here, by retries
whose backoff grows to minutes; they never cost the run a restart. Only an observe that keeps
failing past its bounded retries is taken as a dead sandbox.

Each kind of call takes its options as one bundle (`ActivityOptions`, at the end): a call site
in `workflows/calls/` passes `**policies.X.options()` and writes no timeout or retry of its
own (tests/workflows/test_activity_options.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TypedDict

from temporalio.common import RetryPolicy

# Errors the providers mark as terminal; retrying them cannot help.
NON_RETRYABLE_TYPES = [
    "InvalidSpec",
    "AuthenticationFailed",
    "PermissionDenied",
    "InvalidRequest",
    "SpendingLimit",
    "DailySpendingLimit",
    "SandboxNotFound",
    "MissingSecret",
    "MissingCredentials",
    "SandboxGone",
    "SpecRefused",
]

# Creating a sandbox and starting the agent: keep trying through long outages (~1 h).
CREATE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=5),
    maximum_attempts=16,
    non_retryable_error_types=NON_RETRYABLE_TYPES,
)
CREATE_TIMEOUT = timedelta(minutes=30)
CREATE_HEARTBEAT = timedelta(seconds=60)

# Watching the agent: bounded, so a sandbox that stopped answering is noticed (~6 min).
OBSERVE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    maximum_attempts=10,
    non_retryable_error_types=NON_RETRYABLE_TYPES,
)
# How long past its own wait an observe may take before Temporal times it out.
OBSERVE_GRACE = timedelta(minutes=2)
# The same for an observe that ends at the agent's stall deadline: a worker SIGKILLed during
# it would otherwise make the stall wait out the heartbeat timeout (30..270 s) before another
# worker looks; Temporal times it out this soon after the deadline instead, and the retry only
# looks (it waits what is left of the window: nothing). Costs no command: only the timeout moves.
DEADLINE_OBSERVE_GRACE = timedelta(seconds=10)
# Heartbeats are billable actions. The observe heartbeats only to stay inside its heartbeat
# timeout (none at its start, then one per 0.8 x the timeout: activities.heartbeat), and the
# timeout is how long a SIGKILLed worker's observe waits before another worker takes it over
# (the agent runs on meanwhile; a gracefully stopped worker hands its watches over at once). So
# it follows poll_seconds, the run's own choice of how closely to be watched: 4.5 x poll,
# between 30 s and 270 s. At the default 60 s poll: 270 s, a heartbeat per 216 s of watching
# (about 15 an hour), and a dead worker's watches taken over within 4.5 min.
OBSERVE_HEARTBEAT_MIN = timedelta(seconds=30)
OBSERVE_HEARTBEAT_MAX = timedelta(seconds=270)
OBSERVE_HEARTBEAT_PER_POLL = 4.5


def observe_heartbeat(poll_seconds: float) -> timedelta:
    wanted = timedelta(seconds=poll_seconds * OBSERVE_HEARTBEAT_PER_POLL)
    return min(OBSERVE_HEARTBEAT_MAX, max(OBSERVE_HEARTBEAT_MIN, wanted))


# Reading a checkpoint, pausing, stopping: short calls, retried with growing backoff.
ACTION_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=2),
    maximum_attempts=10,
    non_retryable_error_types=NON_RETRYABLE_TYPES,
)
ACTION_TIMEOUT = timedelta(minutes=2)
# Pausing, stopping, waking, extending and listing sandboxes heartbeat
# (activities/sandbox/lifecycle.py), so an attempt whose worker was killed is retried this soon, not
# after ACTION_TIMEOUT (the reduced chaos run saw a run's last stop wait 2 min for a worker
# SIGKILLed as it began). A quick call sends no heartbeat at all (activities/heartbeat.py).
ACTION_HEARTBEAT = timedelta(seconds=20)
# The read that confirms a stall (workflows/stall_steps.py) is on the stall's own clock: a read
# whose worker dies is retried this soon, not after ACTION_TIMEOUT (a full chaos run saw a
# stall noticed 2 min late so). A checkpoint read takes well under a second.
STALL_READ_TIMEOUT = timedelta(seconds=15)

# A done check (activities.delivery.done_checks): its own limit (the spec's) plus this for the kill
# after it and the answer; a few tries for a worker or a provider lost meanwhile (a check runs
# again harmlessly), then the run goes on from its checkpoint in a new sandbox.
DONE_CHECK_GRACE = timedelta(minutes=2)
DONE_CHECK_HEARTBEAT = timedelta(seconds=60)
DONE_CHECK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    maximum_attempts=5,
    non_retryable_error_types=NON_RETRYABLE_TYPES,
)


def done_check_timeout(check_seconds: float) -> timedelta:
    return timedelta(seconds=check_seconds) + DONE_CHECK_GRACE


# The done check's own sandbox made ready (activities.delivery.done_sandbox): the push (5 min at
# most), the create and the clone of the repository (20 min), the checkout (10 min); retried like a
# check (the push makes the same commit again, the create finds its sandbox by name).
PREPARE_DONE_CHECK_TIMEOUT = timedelta(minutes=40)


# Cleanup on the way out must not hold the run hostage: fewer attempts.
CLEANUP_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
    non_retryable_error_types=NON_RETRYABLE_TYPES,
)

# Asking the server whether a host's queue has a poller (workflows.pure.hosts): quick, a few tries;
# one that cannot be made leaves the host taken as there (the step is sent again).
HOST_CHECK_TIMEOUT = timedelta(seconds=30)
HOST_CHECK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_attempts=3
)

VISIBILITY_CHECK_TIMEOUT = timedelta(seconds=30)
VISIBILITY_CHECK_RETRY = RetryPolicy(maximum_attempts=3)

# Checking a spec against the worker's grants (a local activity at a run's start, before
# anything is made): quick, a few tries; a check that cannot be made fails the run rather
# than let its spec through.
SPEC_CHECK_TIMEOUT = timedelta(seconds=30)
SPEC_CHECK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_attempts=5
)

# Admission (workflows/admission_steps.py): asking the pool for a place and looking for holders
# that closed are quick and safe to repeat; they are retried until they go through.
ADMISSION_TIMEOUT = timedelta(seconds=30)
ADMISSION_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)
)

# Notifications: the run's first try at each state change is quick. The activity never fails
# for a receiver (it says which it did not reach), so its few retries are for a worker that
# died or lacked it (a rolling deploy); targets it did not reach go to an `OvernightNotify`
# workflow, which keeps trying each for up to a day.
NOTIFY_TIMEOUT = timedelta(seconds=30)
NOTIFY_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_attempts=3
)
DELIVERY_TIMEOUT = timedelta(seconds=30)
DELIVERY_DEADLINE = timedelta(hours=24)
DELIVERY_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=10),
    non_retryable_error_types=["WebhookRefused"],
)

# A snapshot capture: up to ten minutes held paused (Runtime's capture deadline) plus the pause
# and the wake; a few tries (each finds a capture already taken by its name), then it counts
# as a failed capture, tried again after `snapshot_every_seconds`, never a restart.
SNAPSHOT_TIMEOUT = timedelta(minutes=15)
SNAPSHOT_HEARTBEAT = timedelta(seconds=60)
SNAPSHOT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=3,
    non_retryable_error_types=NON_RETRYABLE_TYPES,
)

# The scheduled reap (`OvernightReap`): one pass over every sandbox the worker's providers
# list; a few tries, then the next hour's run tries again.
REAP_TIMEOUT = timedelta(minutes=30)
REAP_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=10), backoff_coefficient=2.0, maximum_attempts=3
)

# Keeping the workspace at a checkpoint (activities.workspace.activities): the script is
# killed in the sandbox after 5 min; a few tries, then the keep counts as failed (said in the
# status), never a restart: the run goes on without it.
KEEP_WORKSPACE_TIMEOUT = timedelta(minutes=7)
KEEP_WORKSPACE_HEARTBEAT = timedelta(seconds=60)
KEEP_WORKSPACE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=3,
    non_retryable_error_types=NON_RETRYABLE_TYPES,
)


# A finished run's push of its work to its branch (activities.delivery.branch_push): the script is
# killed in the sandbox after 5 min, the worker's look at the origin takes at most 3 min; an
# origin out of reach is tried again with backoff for about 5 min in all, a refusal 3 times
# (the activity says when it is final), then the run needs a person, its sandbox paused.
CONFIRM_PUSHED_TIMEOUT = timedelta(minutes=10)
CONFIRM_PUSHED_HEARTBEAT = timedelta(seconds=60)
CONFIRM_PUSHED_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=5),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=2),
    maximum_attempts=6,
    non_retryable_error_types=NON_RETRYABLE_TYPES,
)
# Its pull request (activities.delivery.pull_request): GitHub's client waits out short rate limits
# and server errors itself (up to 15 min); a longer wait it names is Temporal's (`next_retry_delay`
# overrides the backoff), about an hour of tries in all, then the run needs a person.
OPEN_PULL_REQUEST_TIMEOUT = timedelta(minutes=20)
OPEN_PULL_REQUEST_HEARTBEAT = timedelta(seconds=30)
OPEN_PULL_REQUEST_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=10),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=10),
    maximum_attempts=8,
    non_retryable_error_types=NON_RETRYABLE_TYPES,
)
# A pull request's CI, watched (activities.delivery.ci_checks): one call polls for up to a window
# and returns as soon as the checks are no longer pending; it heartbeats while it waits. GitHub's
# rate limits and server errors are retried as the pull request's are, then a person is asked.
WATCH_CHECKS_WINDOW = timedelta(minutes=10)
WATCH_CHECKS_TIMEOUT = WATCH_CHECKS_WINDOW + timedelta(minutes=10)
WATCH_CHECKS_HEARTBEAT = timedelta(seconds=60)
WATCH_CHECKS_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=10),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=10),
    maximum_attempts=8,
    non_retryable_error_types=NON_RETRYABLE_TYPES,
)


# Each kind of call's options, as one bundle its call sites pass (`**X.options()`).


class LocalActivityKwargs(TypedDict, total=False):
    """The options a local activity takes: no heartbeat timeout."""

    start_to_close_timeout: timedelta
    retry_policy: RetryPolicy
    schedule_to_close_timeout: timedelta


class ActivityKwargs(LocalActivityKwargs, total=False):
    """The options an activity takes."""

    heartbeat_timeout: timedelta


@dataclass(frozen=True)
class ActivityOptions:
    """One kind of call's timeouts and retry policy. An option left None is not passed at all,
    so each call's command stays the one its recorded histories hold."""

    start_to_close: timedelta
    retry: RetryPolicy
    heartbeat: timedelta | None = None
    schedule_to_close: timedelta | None = None

    def options(self) -> ActivityKwargs:
        """Keyword arguments for the SDK's calls of an activity."""
        kwargs = ActivityKwargs(start_to_close_timeout=self.start_to_close, retry_policy=self.retry)
        if self.heartbeat is not None:
            kwargs["heartbeat_timeout"] = self.heartbeat
        if self.schedule_to_close is not None:
            kwargs["schedule_to_close_timeout"] = self.schedule_to_close
        return kwargs

    def local_options(self) -> LocalActivityKwargs:
        """Keyword arguments for the SDK's calls of a local activity (no heartbeat)."""
        if self.heartbeat is not None:
            raise ValueError("a local activity takes no heartbeat timeout")
        kwargs = LocalActivityKwargs(
            start_to_close_timeout=self.start_to_close, retry_policy=self.retry
        )
        if self.schedule_to_close is not None:
            kwargs["schedule_to_close_timeout"] = self.schedule_to_close
        return kwargs


# Quick questions: the spec's check and the pool's settings are local activities (the worker
# running the workflow answers), so is the search attributes' check in runs that meet
# LEAN_WRITES_PATCH; a host's pollers and admission are asked of any worker.
SPEC_CHECK = ActivityOptions(SPEC_CHECK_TIMEOUT, SPEC_CHECK_RETRY)
POOL_SETTINGS = SPEC_CHECK  # the pool's settings are read as a spec is checked
VISIBILITY_CHECK = ActivityOptions(VISIBILITY_CHECK_TIMEOUT, VISIBILITY_CHECK_RETRY)
ADMISSION = ActivityOptions(ADMISSION_TIMEOUT, ADMISSION_RETRY)
HOST_CHECK = ActivityOptions(HOST_CHECK_TIMEOUT, HOST_CHECK_RETRY)

# A sandbox made, its agent started again.
CREATE = ActivityOptions(CREATE_TIMEOUT, CREATE_RETRY, heartbeat=CREATE_HEARTBEAT)
START_AGENT = ActivityOptions(ACTION_TIMEOUT, ACTION_RETRY, heartbeat=CREATE_HEARTBEAT)
# A short call the run needs (answering the agent); waking or extending a sandbox heartbeats.
ACTION = ActivityOptions(ACTION_TIMEOUT, ACTION_RETRY)
SANDBOX_ACTION = ActivityOptions(ACTION_TIMEOUT, ACTION_RETRY, heartbeat=ACTION_HEARTBEAT)
# A short best-effort call (a read, a cap, a delete): fewer tries; pausing, stopping, listing
# sandboxes and freeing the run's store heartbeat.
CLEANUP = ActivityOptions(ACTION_TIMEOUT, CLEANUP_RETRY)
SANDBOX_CLEANUP = ActivityOptions(ACTION_TIMEOUT, CLEANUP_RETRY, heartbeat=ACTION_HEARTBEAT)

PREPARE_DONE_CHECK = ActivityOptions(
    PREPARE_DONE_CHECK_TIMEOUT, DONE_CHECK_RETRY, heartbeat=DONE_CHECK_HEARTBEAT
)
SNAPSHOT = ActivityOptions(SNAPSHOT_TIMEOUT, SNAPSHOT_RETRY, heartbeat=SNAPSHOT_HEARTBEAT)
KEEP_WORKSPACE = ActivityOptions(
    KEEP_WORKSPACE_TIMEOUT, KEEP_WORKSPACE_RETRY, heartbeat=KEEP_WORKSPACE_HEARTBEAT
)
CONFIRM_PUSHED = ActivityOptions(
    CONFIRM_PUSHED_TIMEOUT, CONFIRM_PUSHED_RETRY, heartbeat=CONFIRM_PUSHED_HEARTBEAT
)
OPEN_PULL_REQUEST = ActivityOptions(
    OPEN_PULL_REQUEST_TIMEOUT, OPEN_PULL_REQUEST_RETRY, heartbeat=OPEN_PULL_REQUEST_HEARTBEAT
)
WATCH_CHECKS = ActivityOptions(
    WATCH_CHECKS_TIMEOUT, WATCH_CHECKS_RETRY, heartbeat=WATCH_CHECKS_HEARTBEAT
)

# The run's first try at its notifications; every target again, and one target, until the
# delivery deadline (`OvernightNotify`).
NOTIFY = ActivityOptions(NOTIFY_TIMEOUT, NOTIFY_RETRY)
NOTIFY_AGAIN = ActivityOptions(NOTIFY_TIMEOUT, DELIVERY_RETRY, schedule_to_close=DELIVERY_DEADLINE)
DELIVERY = ActivityOptions(DELIVERY_TIMEOUT, DELIVERY_RETRY, schedule_to_close=DELIVERY_DEADLINE)

REAP = ActivityOptions(REAP_TIMEOUT, REAP_RETRY)


def checkpoint_read(timeout: timedelta = ACTION_TIMEOUT) -> ActivityOptions:
    """A checkpoint's copy off the sandbox, best effort; `timeout`: STALL_READ_TIMEOUT for the
    read that confirms a stall."""
    return ActivityOptions(timeout, CLEANUP_RETRY)


def done_check(check_seconds: float) -> ActivityOptions:
    """A done check whose own limit is `check_seconds`."""
    return ActivityOptions(
        done_check_timeout(check_seconds), DONE_CHECK_RETRY, heartbeat=DONE_CHECK_HEARTBEAT
    )


def observe_timeout(wait_seconds: float, *, at_deadline: bool = False) -> timedelta:
    """An observe's attempt timeout: its wait plus its grace (the short one at the deadline)."""
    grace = DEADLINE_OBSERVE_GRACE if at_deadline else OBSERVE_GRACE
    return timedelta(seconds=wait_seconds) + grace


def observe(
    wait_seconds: float, *, poll_seconds: float, at_deadline: bool, bounded: bool
) -> ActivityOptions:
    """One look of at most `wait_seconds`. `bounded`: a look ending at the stall deadline with a
    whole-look limit (runs that meet DEADLINE_LOOK_BOUNDED_PATCH), its retries included."""
    whole = observe_timeout(wait_seconds, at_deadline=True) if bounded else None
    return ActivityOptions(
        observe_timeout(wait_seconds, at_deadline=at_deadline),
        OBSERVE_RETRY,
        heartbeat=observe_heartbeat(poll_seconds),
        schedule_to_close=whole,
    )
