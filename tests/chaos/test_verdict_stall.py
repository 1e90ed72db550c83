"""The chaos verdict's stall lateness: measured from the run's own deadline, with the time no
worker was alive left out, and held to its bound."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from overnight.core.models import RestartRecord
from tests.chaos.plan import RunPlan
from tests.chaos.verdict import RunFacts, stall_late_allowed, stall_lateness_own

SEEN = datetime(2026, 12, 2, 20, 0, tzinfo=UTC)


def stalled_run(acted_after: float, spans: list[tuple[float, float]]) -> RunFacts:
    record = RestartRecord(
        attempt=1,
        reason="agent stalled 1 min",
        at=SEEN + timedelta(seconds=60 + acted_after),
        last_progress_at=SEEN,
    )
    crash = RestartRecord(attempt=2, reason="agent crashed (exit 3)", at=SEEN)
    plan = RunPlan(run_id="r", provider="runtime", faults=("stall",))
    return RunFacts(plan=plan, restarts=[record, crash], stall_seconds=60, no_worker_spans=spans)


def test_a_stall_is_late_by_what_follows_the_runs_own_deadline() -> None:
    assert stall_lateness_own(stalled_run(12.0, [])) == [12.0]


def test_time_with_no_worker_alive_is_left_out() -> None:
    deadline = SEEN.timestamp() + 60
    spans = [(deadline - 5, deadline + 7), (deadline + 100, deadline + 200)]
    assert stall_lateness_own(stalled_run(20.0, spans)) == [13.0]


def test_the_bound_follows_the_poll() -> None:
    assert stall_late_allowed(60.0) - stall_late_allowed(1.0) == 59.0
