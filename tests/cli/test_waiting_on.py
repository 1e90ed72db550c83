"""What `overnight status` and `overnight list` say a run waits on (overnight/cli/retrying.py):
a pending activity's last failure in one line, with its try and when the next one is due; and
the one line a run failed with."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.common.v1 import ActivityType
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.failure.v1 import Failure
from temporalio.api.workflow.v1 import PendingActivityInfo

from overnight.cli.client import RunSummary
from overnight.cli.render import runs_text, status_text
from overnight.cli.retrying import retrying_line, wait_words
from overnight.core.models import Budget, RunStatus

NOW = datetime(2026, 12, 2, 14, 0, tzinfo=UTC)
CLONE = "cloning http://127.0.0.1:9/x.git: connection refused (fatal: unable to access ...)"


def pending(
    attempt: int, *, next_in: timedelta | None, running: bool = False
) -> PendingActivityInfo:
    info = PendingActivityInfo(
        activity_type=ActivityType(name="create_sandbox"),
        attempt=attempt,
        maximum_attempts=16,
        last_failure=Failure(message=CLONE + "\nsecond line"),
        state=PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        if running
        else PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED,
    )
    if next_in is not None:
        at = Timestamp()
        at.FromDatetime(NOW + next_in)
        info.next_attempt_schedule_time.CopyFrom(at)
    return info


def test_a_retried_create_says_what_failed_which_try_and_when_the_next_is() -> None:
    line = retrying_line(pending(9, next_in=timedelta(minutes=4, seconds=10)), NOW)
    assert line == f"create sandbox, try 9 of 16, next in 4 min: {CLONE}"
    running = retrying_line(pending(3, next_in=None, running=True), NOW)
    assert running == f"create sandbox, try 3 of 16, trying now: {CLONE}"
    # The first try has no failure to tell of.
    assert retrying_line(pending(1, next_in=None, running=True), NOW) is None


def test_waits_are_said_in_words() -> None:
    assert [wait_words(s) for s in (-3, 12, 61, 3 * 3600 + 5 * 60)] == [
        "0 s",
        "12 s",
        "1 min",
        "3 h 05 min",
    ]


def test_list_shows_what_an_open_run_waits_on_under_its_row() -> None:
    runs = [
        RunSummary(
            run_id="waits",
            workflow_status="running",
            state="starting",
            started_at=NOW - timedelta(minutes=6),
            waiting_on=[f"create sandbox, try 9 of 16, next in 4 min: {CLONE}"],
        ),
        RunSummary(run_id="fine", workflow_status="running", state="running", started_at=NOW),
    ]
    lines = runs_text(runs, now=NOW).splitlines()
    assert lines[1].startswith("waits ")
    assert lines[2] == f"  waiting on: create sandbox, try 9 of 16, next in 4 min: {CLONE}"
    assert lines[3].startswith("fine ")


def test_status_shows_the_one_line_a_run_failed_with() -> None:
    status = RunStatus(
        run_id="r",
        state="failed",
        attempt=1,
        budget=Budget(),
        started_at=NOW,
        failure="run r cannot start: field repo: cloning x: repository not found; fix it",
    )
    text = status_text(status, now=NOW, ui_url=None)
    assert (
        "  failed:        run r cannot start: field repo: cloning x: repository not found" in text
    )
