"""A create's failed try becomes a note for its run's card only when another try follows
(activities/sandbox/retry_notes.py, overnight/core/retry_note.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.sandbox.retry_notes import retry_note
from overnight.core.retry_note import next_try_delay, note_line

POLICY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=5),
    maximum_attempts=16,
    non_retryable_error_types=["InvalidRequest"],
)


def test_a_failed_try_with_one_to_follow_is_noted_and_a_last_or_final_one_is_not() -> None:
    info = replace(ActivityEnvironment().info, attempt=8, retry_policy=POLICY, workflow_id="r")
    refused = ApplicationError("cloning x: connection refused\nmore", type="SandboxSetupFailed")
    note = retry_note(info, refused, "create sandbox", 1)
    assert note is not None
    assert (note.next_try, note.max_tries, note.message) == (9, 16, "cloning x: connection refused")
    assert note_line(note.model_copy(update={"next_at": None})) == (
        "create sandbox, try 9 of 16: cloning x: connection refused"
    )
    assert retry_note(replace(info, attempt=16), refused, "create sandbox", 1) is None
    final = ApplicationError("bad", type="InvalidRequest")
    assert retry_note(info, final, "create sandbox", 1) is None
    gone = ApplicationError("no", type="SpecUnusable", non_retryable=True)
    assert retry_note(info, gone, "create sandbox", 1) is None


def test_the_next_try_waits_as_temporals_backoff_does() -> None:
    waits = [
        next_try_delay(n, timedelta(seconds=2), 2.0, timedelta(minutes=5)) for n in (1, 2, 8, 9)
    ]
    assert waits == [
        timedelta(seconds=2),
        timedelta(seconds=4),
        timedelta(seconds=256),
        timedelta(minutes=5),
    ]
