"""`decide`, `decide_resume`, the budget and the checkpoint judge: pure, so every edge is cheap.

Each test builds a run state at a fixed moment, shows the function one observation, and checks
the step it chose, including the edges the design names: exactly at the stall threshold, the
fresh-context cap, the budget's last restart, hours running out mid-restart.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from activities.models import CheckpointRead, Observation
from fakes.activities import checkpoint_binary, checkpoint_ok, checkpoint_too_large, note
from overnight.core.models import Budget, BudgetExtension, RunSpec
from workflows.pure import budget
from workflows.pure.checkpoint import SUMMARY_CHARS, judge, summarize
from workflows.pure.decide import (
    QUIET_WAKE,
    Finish,
    FreshStart,
    NeedsAttention,
    ObserveFailed,
    Restart,
    Watch,
    decide,
    decide_resume,
    is_quiet,
    is_stall,
    next_wake,
)
from workflows.pure.state import SupervisorState

T0 = datetime(2026, 1, 1, 22, 0, tzinfo=UTC)
# 2 vCPU x 0.025 + 4 GiB x 0.0075 per hour with the default size and rates.
DEFAULT_RATE = 0.08


def spec(**overrides: Any) -> RunSpec:
    return RunSpec(
        run_id="pure",
        repo="file:///tmp/repo",
        agent_dir="/tmp/agent",
        command="python3 /workspace/agent/main.py",
        **overrides,
    )


def running(
    *, at: datetime = T0, progress_at: datetime | None = None, **overrides: Any
) -> SupervisorState:
    """A run whose first sandbox started at `at` and is being watched."""
    run_spec = overrides.pop("spec", None) or spec()
    fields: dict[str, Any] = {
        "spec": run_spec,
        "budget": run_spec.budget,
        "started_at": at,
        "state": "running",
        "attempt": 1,
        "sandbox_id": "box-1",
        "process_id": "agent-1-0",
        "sandbox_started_at": at,
        "last_progress_at": progress_at or at,
    }
    fields.update(overrides)
    return SupervisorState(**fields)


def working() -> Observation:
    return Observation(process_state="running", sandbox_state="running")


def exited(code: int | None) -> Observation:
    return Observation(process_state="exited", exit_code=code, sandbox_state="running")


def later(**delta: float) -> datetime:
    return T0 + timedelta(**delta)


# ---- one row of the failure table each ---------------------------------------------------


def test_agent_exit_zero_finishes_the_run() -> None:
    assert decide(running(), exited(0), later(minutes=5)) == Finish()


def test_agent_exit_zero_finishes_even_when_the_budget_is_gone() -> None:
    state = running(restarts_used=5)
    assert decide(state, exited(0), later(hours=30)) == Finish()


def test_an_exited_agent_with_no_exit_code_is_not_finished() -> None:
    # Runtime can report a process exited without its code: that is not success.
    assert decide(running(), exited(None), later(minutes=5)) == Restart("agent crashed (exit None)")
    stopped = Observation(process_state="exited", exit_code=None, sandbox_state="stopped")
    assert decide(running(), stopped, later(minutes=5)) == Restart(
        "sandbox stopped (no reason given)"
    )


@pytest.mark.parametrize("code", [1, 2, 74, 76, 137, 255])
def test_crash_restarts_in_a_new_sandbox_and_counts(code: int) -> None:
    decision = decide(running(), exited(code), later(minutes=5))
    assert decision == Restart(f"agent crashed (exit {code})", counted=True)


def test_killed_agent_is_restarted() -> None:
    seen = Observation(process_state="killed", sandbox_state="running")
    assert decide(running(), seen, later(minutes=1)) == Restart("agent was killed")


def test_vanished_agent_process_is_restarted() -> None:
    seen = Observation(process_state="missing", sandbox_state="running")
    assert decide(running(), seen, later(minutes=1)) == Restart("agent process is gone")


@pytest.mark.parametrize(
    "reason", ["lease_expired", "timeout", "time_limit", "lease_end", "expired"]
)
def test_sandbox_time_limit_gets_a_new_sandbox(reason: str) -> None:
    seen = Observation(process_state="killed", sandbox_state="stopped", stop_reason=reason)
    assert decide(running(), seen, later(hours=1)) == Restart("sandbox time limit reached")


def test_sandbox_stopped_for_another_reason_says_so() -> None:
    seen = Observation(process_state="killed", sandbox_state="stopped", stop_reason="oom")
    assert decide(running(), seen, later(minutes=3)) == Restart("sandbox stopped (oom)")
    unexplained = Observation(process_state="killed", sandbox_state="stopped")
    assert decide(running(), unexplained, later(minutes=3)) == Restart(
        "sandbox stopped (no reason given)"
    )


def test_missing_sandbox_is_replaced() -> None:
    seen = Observation(process_state="missing", sandbox_state="missing")
    assert decide(running(), seen, later(minutes=3)) == Restart("sandbox disappeared")


def test_sandbox_paused_from_outside_is_replaced() -> None:
    seen = Observation(process_state="running", sandbox_state="paused")
    assert decide(running(), seen, later(minutes=3)) == Restart("sandbox was paused from outside")


def test_observe_out_of_retries_means_the_sandbox_stopped_answering() -> None:
    decision = decide(running(), ObserveFailed("connection reset"), later(minutes=7))
    assert decision == Restart("sandbox stopped answering (connection reset)")


def test_only_a_look_at_a_running_agent_with_no_new_checkpoint_is_quiet() -> None:
    assert is_quiet(working())
    assert not is_quiet(ObserveFailed("connection reset"))
    news = Observation(
        process_state="running", sandbox_state="running", checkpoint=checkpoint_ok(note("2"))
    )
    assert not is_quiet(news)


def test_a_sandbox_that_stopped_after_the_agent_finished_still_finishes() -> None:
    seen = Observation(process_state="exited", exit_code=0, sandbox_state="stopped")
    assert decide(running(), seen, later(minutes=3)) == Finish()


# ---- stall ----------------------------------------------------------------------------------


def test_quiet_agent_one_second_before_the_stall_threshold_is_watched() -> None:
    decision = decide(running(), working(), later(seconds=899))
    assert decision == Watch(until=later(seconds=900))


def test_quiet_agent_exactly_at_the_stall_threshold_is_restarted() -> None:
    decision = decide(running(), working(), later(seconds=900))
    assert decision == Restart("agent stalled 15 min", counted=True)


def test_stall_counts_from_the_last_checkpoint_not_from_the_start() -> None:
    state = running(progress_at=later(minutes=20))
    assert isinstance(decide(state, working(), later(minutes=34)), Watch)
    assert decide(state, working(), later(minutes=35)) == Restart("agent stalled 15 min")


def test_a_stall_is_known_as_one_whether_restarted_now_or_pending_a_person() -> None:
    assert is_stall(decide(running(), working(), later(seconds=900)))
    spent = running(spec=spec(budget=Budget(max_restarts=0)))
    held = decide(spent, working(), later(seconds=900))
    assert isinstance(held, NeedsAttention) and is_stall(held)
    assert not is_stall(decide(running(), working(), later(seconds=10)))
    assert not is_stall(Restart("agent crashed (exit 3)"))


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (3, "3 s"),
        (59, "59 s"),
        (60, "1 min"),
        (90, "90 s"),
        (120, "2 min"),
        (3600, "1 h"),
        (5400, "90 min"),
        (7200, "2 h"),
    ],
)
def test_stall_reason_says_how_long_in_plain_units(seconds: float, said: str) -> None:
    state = running(spec=spec(stall_seconds=seconds))
    assert decide(state, working(), later(seconds=seconds)) == Restart(f"agent stalled {said}")


# ---- fresh context ---------------------------------------------------------------------------


def test_fresh_context_exit_restarts_in_the_same_sandbox_without_counting() -> None:
    assert decide(running(), exited(75), later(minutes=30)) == FreshStart()


def test_fiftieth_fresh_start_is_allowed() -> None:
    state = running(fresh_starts_used=49)
    assert decide(state, exited(75), later(minutes=30)) == FreshStart()


def test_fifty_first_fresh_start_counts_as_a_restart() -> None:
    state = running(fresh_starts_used=50)
    decision = decide(state, exited(75), later(minutes=30))
    assert decision == Restart("fresh-context starts used up (50)", counted=True)


def test_custom_fresh_context_exit_code_is_honoured() -> None:
    state = running(spec=spec(fresh_context_exit_code=3))
    assert decide(state, exited(3), later(minutes=1)) == FreshStart()
    assert decide(state, exited(75), later(minutes=1)) == Restart("agent crashed (exit 75)")


def test_fresh_start_with_the_hours_used_up_waits_for_a_person() -> None:
    decision = decide(running(), exited(75), later(hours=24))
    assert isinstance(decision, NeedsAttention)
    assert decision.reason.startswith("hours budget used up")
    assert decision.pending_restart is None


def test_fresh_starts_used_up_with_no_restarts_left_waits_for_a_person() -> None:
    state = running(fresh_starts_used=50, restarts_used=5)
    decision = decide(state, exited(75), later(minutes=1))
    assert decision == NeedsAttention(
        "restart budget used up (5 of 5)", pending_restart="fresh-context starts used up (50)"
    )


# ---- budget: restarts, hours, spend ----------------------------------------------------------


def test_last_restart_of_the_budget_is_allowed() -> None:
    state = running(restarts_used=4)
    assert decide(state, exited(1), later(minutes=5)) == Restart("agent crashed (exit 1)")


def test_restart_beyond_the_budget_needs_attention_and_keeps_the_restart_pending() -> None:
    state = running(restarts_used=5)
    decision = decide(state, exited(1), later(minutes=5))
    assert decision == NeedsAttention(
        "restart budget used up (5 of 5)", pending_restart="agent crashed (exit 1)"
    )


def test_zero_restart_budget_sends_the_first_crash_to_a_person() -> None:
    state = running(spec=spec(budget=Budget(max_restarts=0)), budget=Budget(max_restarts=0))
    decision = decide(state, exited(1), later(minutes=1))
    assert isinstance(decision, NeedsAttention)
    assert decision.pending_restart == "agent crashed (exit 1)"


def test_restart_budget_does_not_stop_a_healthy_agent() -> None:
    state = running(restarts_used=5, progress_at=later(minutes=10))
    assert isinstance(decide(state, working(), later(minutes=15)), Watch)


def test_hours_running_out_mid_restart_keeps_the_restart_pending() -> None:
    state = running(restarts_used=1)
    decision = decide(state, exited(1), later(hours=24))
    assert isinstance(decision, NeedsAttention)
    assert decision.reason == "hours budget used up (24.00 of 24 h)"
    assert decision.pending_restart == "agent crashed (exit 1)"


def test_hours_used_up_stops_a_healthy_agent_exactly_at_the_limit() -> None:
    state = running(progress_at=later(hours=23, minutes=55))
    assert isinstance(decide(state, working(), later(hours=23, minutes=59, seconds=59)), Watch)
    decision = decide(state, working(), later(hours=24))
    assert decision == NeedsAttention("hours budget used up (24.00 of 24 h)")


def test_stall_and_budget_at_the_same_moment_restart_goes_pending() -> None:
    state = running(progress_at=later(hours=23, minutes=45))
    decision = decide(state, working(), later(hours=24))
    assert isinstance(decision, NeedsAttention)
    assert decision.pending_restart == "agent stalled 15 min"


def test_time_waiting_for_a_person_does_not_count_as_hours() -> None:
    state = running(attention_seconds=3 * 3600)
    assert budget.hours_used(state, later(hours=10)) == pytest.approx(7)
    waiting = running(attention_seconds=3600, attention_since=later(hours=5))
    assert budget.hours_used(waiting, later(hours=8)) == pytest.approx(4)


def test_spend_is_sandbox_lifetime_times_its_hourly_rate() -> None:
    assert budget.hourly_rate_usd(spec()) == pytest.approx(DEFAULT_RATE)
    state = running(closed_spend_usd=0.5)
    assert budget.spend_usd(state, later(hours=2)) == pytest.approx(0.5 + 2 * DEFAULT_RATE)
    between = running(closed_spend_usd=0.5, sandbox_started_at=None)
    assert budget.spend_usd(between, later(hours=2)) == pytest.approx(0.5)


def test_spend_budget_used_up_needs_attention() -> None:
    capped = Budget(max_spend_usd=DEFAULT_RATE)
    state = running(spec=spec(budget=capped), budget=capped, progress_at=later(minutes=55))
    assert isinstance(decide(state, working(), later(minutes=59)), Watch)
    decision = decide(state, working(), later(hours=1))
    assert isinstance(decision, NeedsAttention)
    assert decision.reason == "spend budget used up ($0.08 of $0.08)"


def test_watch_wakes_at_the_spend_deadline() -> None:
    capped = Budget(max_spend_usd=DEFAULT_RATE)
    state = running(spec=spec(budget=capped), budget=capped, progress_at=later(minutes=50))
    decision = decide(state, working(), later(minutes=55))
    assert isinstance(decision, Watch)
    assert abs((decision.until - later(hours=1)).total_seconds()) < 0.01


def test_watch_wakes_at_the_hours_deadline() -> None:
    state = running(progress_at=later(hours=23, minutes=50))
    assert decide(state, working(), later(hours=23, minutes=55)) == Watch(until=later(hours=24))


def test_quiet_agent_is_looked_at_again_within_ten_minutes() -> None:
    state = running(spec=spec(stall_seconds=3600))
    assert decide(state, working(), later(minutes=1)) == Watch(until=later(minutes=1) + QUIET_WAKE)


def test_next_wake_is_never_in_the_past() -> None:
    state = running()
    assert next_wake(state, later(hours=1)) == later(hours=1)


def test_budget_deadline_ignores_spend_between_sandboxes() -> None:
    capped = Budget(max_spend_usd=DEFAULT_RATE)
    state = running(spec=spec(budget=capped), budget=capped, sandbox_started_at=None)
    assert budget.budget_deadline(state, T0) == later(hours=24)


# ---- after a budget extension -----------------------------------------------------------------


def test_resume_carries_out_the_pending_restart_and_counts_it() -> None:
    state = running(
        restarts_used=5,
        budget=Budget(max_restarts=6),
        pending_restart="agent crashed (exit 1)",
        sandbox_id=None,
    )
    assert decide_resume(state, later(hours=1)) == Restart("agent crashed (exit 1)", counted=True)


def test_resume_with_too_small_an_extension_keeps_waiting() -> None:
    state = running(restarts_used=5, pending_restart="agent crashed (exit 1)")
    decision = decide_resume(state, later(hours=1))
    assert decision == NeedsAttention(
        "restart budget used up (5 of 5)", pending_restart="agent crashed (exit 1)"
    )


def test_resume_after_more_hours_restarts_from_the_checkpoint_without_counting() -> None:
    state = running(budget=Budget(max_hours=30), attention_since=later(hours=24))
    decision = decide_resume(state, later(hours=25))
    assert decision == Restart("resumed after the budget was extended", counted=False)


def test_resume_without_more_hours_keeps_waiting() -> None:
    state = running(attention_since=later(hours=24), budget=Budget(max_restarts=9))
    decision = decide_resume(state, later(hours=30))
    assert isinstance(decision, NeedsAttention)
    assert decision.reason.startswith("hours budget used up (24.00")


def test_extension_adds_to_each_limit() -> None:
    start = Budget(max_restarts=5, max_hours=24, max_spend_usd=10)
    grown = budget.extended(start, BudgetExtension(restarts=2, hours=1.5, spend_usd=5))
    assert grown == Budget(max_restarts=7, max_hours=25.5, max_spend_usd=15)


def test_extension_keeps_an_unlimited_spend_unlimited() -> None:
    grown = budget.extended(Budget(), BudgetExtension(spend_usd=5))
    assert grown.max_spend_usd is None


def test_empty_extension_is_recognised() -> None:
    assert BudgetExtension().is_empty()
    assert not BudgetExtension(hours=0.5).is_empty()


@pytest.mark.parametrize(
    "payload", [{"restarts": -1}, {"hours": -2}, {"spend_usd": -0.01}, {"restarts": "many"}]
)
def test_extension_refuses_negative_or_mistyped_values(payload: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        BudgetExtension.model_validate(payload)


# ---- checkpoint safety -------------------------------------------------------------------------


def test_json_checkpoint_is_taken() -> None:
    verdict = judge(checkpoint_ok(note("step 2")), previous_was_json=True, max_bytes=1000)
    assert verdict.accepted and verdict.is_json


def test_plain_text_checkpoint_is_taken_when_none_before_was_json() -> None:
    verdict = judge(checkpoint_ok("did step 1"), previous_was_json=False, max_bytes=1000)
    assert verdict.accepted and not verdict.is_json


def test_checkpoint_over_the_cap_is_refused() -> None:
    verdict = judge(checkpoint_too_large(5000), previous_was_json=True, max_bytes=1000)
    assert not verdict.accepted
    assert verdict.reason == "checkpoint is 5000 bytes, over the 1000 cap"


def test_checkpoint_text_over_the_cap_is_refused_even_if_read_whole() -> None:
    verdict = judge(checkpoint_ok("x" * 1001), previous_was_json=False, max_bytes=1000)
    assert not verdict.accepted
    assert verdict.reason == "checkpoint is over the 1000-byte cap"


def test_checkpoint_that_stopped_parsing_as_json_is_refused() -> None:
    truncated = checkpoint_ok('{"next": "step 3", "notes": ["a"')
    verdict = judge(truncated, previous_was_json=True, max_bytes=1000)
    assert not verdict.accepted
    assert verdict.reason == "checkpoint stopped parsing as JSON (truncated or corrupt)"


def test_binary_checkpoint_is_refused() -> None:
    verdict = judge(checkpoint_binary(b"\xff\xfe"), previous_was_json=False, max_bytes=1000)
    assert not verdict.accepted
    assert verdict.reason == "checkpoint could not be read: (invalid start byte)"


def test_checkpoint_not_read_at_all_is_no_verdict() -> None:
    not_read = CheckpointRead(status="unreadable", detail="not read: the sandbox is paused")
    verdict = judge(not_read, previous_was_json=True, max_bytes=1000)
    assert verdict.accepted is False and verdict.reason is None


def test_checkpoint_outside_the_sandbox_is_refused() -> None:
    verdict = judge(CheckpointRead(status="outside"), previous_was_json=False, max_bytes=1000)
    assert not verdict.accepted
    assert verdict.reason == "checkpoint path leads outside the sandbox"


@pytest.mark.parametrize("status", ["missing", "unchanged"])
def test_absent_or_unchanged_checkpoint_is_no_news(status: Any) -> None:
    verdict = judge(CheckpointRead(status=status), previous_was_json=True, max_bytes=1000)
    assert verdict.accepted is False and verdict.reason is None


def test_summary_is_the_next_step_and_the_last_note() -> None:
    summary = summarize(note("write the tests", "cloned", "read the spec"))
    assert summary is not None
    assert (summary.next, summary.last_note) == ("write the tests", "read the spec")


def test_summary_of_a_non_json_or_non_object_checkpoint_is_none() -> None:
    assert summarize("plain words") is None
    assert summarize("[1, 2]") is None
    assert summarize(None) is None


def test_summary_clips_long_text() -> None:
    summary = summarize(note("n" * 500))
    assert summary is not None and summary.next is not None
    assert len(summary.next) == SUMMARY_CHARS and summary.next.endswith("…")
