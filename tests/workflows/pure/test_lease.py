"""Keeping a progressing sandbox, pure: when its lease is extended and how far (never past the
run's hours or spend budget), and what a sandbox found paused at its lease end means (woken,
restarted for a stall judged when it paused, or held for a person when the budget is spent).

The default spec's lease is an hour: its margin is 15 min, an extension reaches 59 min ahead.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from activities.models import Observation
from overnight.core.models import Budget
from tests.workflows.pure.test_decide import DEFAULT_RATE, T0, later, running, spec, working
from workflows.pure import lease
from workflows.pure.decide import (
    ExtendLease,
    NeedsAttention,
    Restart,
    WakeAfterLease,
    Watch,
    decide,
    decide_resume,
    next_wake,
)
from workflows.pure.state import SupervisorState

HOUR_LEASE_ENDS = later(hours=1)
# When an hour lease has its 15 min margin left.
EXTENSION_POINT = later(minutes=45)


def kept(
    *,
    ends: datetime | None = HOUR_LEASE_ENDS,
    extended_at: datetime | None = T0,
    progress_at: datetime | None = None,
    **overrides: Any,
) -> SupervisorState:
    """A run that keeps leases: its lease (granted at `extended_at`) ends at `ends`; its agent
    last progressed at `progress_at` (by default 5 min before the extension point)."""
    fields: dict[str, Any] = {
        "lease_keeping": True,
        "lease_ends_at": ends,
        "lease_extended_at": extended_at,
        "progress_at": progress_at or later(minutes=40),
    }
    fields.update(overrides)
    return running(**fields)


def paused(reported_end: datetime | None = HOUR_LEASE_ENDS) -> Observation:
    return Observation(process_state="running", sandbox_state="paused", lease_ends_at=reported_end)


def capped(**limits: Any) -> dict[str, Any]:
    """A spec and state budget with these limits."""
    run_budget = Budget(**limits)
    return {"spec": spec(budget=run_budget), "budget": run_budget}


# ---- when, and how far, a lease is extended --------------------------------------------------


def test_a_progressing_agents_lease_is_extended_59_minutes_ahead_once_its_margin_is_reached() -> (
    None
):
    state = kept()
    assert lease.extension_target(state, EXTENSION_POINT) == EXTENSION_POINT + lease.MAX_AHEAD
    decision = decide(state, working(), EXTENSION_POINT)
    assert decision == ExtendLease(until=EXTENSION_POINT + lease.MAX_AHEAD)


def test_a_lease_is_not_extended_before_its_margin_is_reached() -> None:
    state = kept()
    before = EXTENSION_POINT - timedelta(seconds=1)
    assert lease.extension_target(state, before) is None
    assert isinstance(decide(state, working(), before), Watch)


def test_a_short_lease_is_extended_by_its_own_length_from_a_quarter_before_its_end() -> None:
    # A 2-minute lease: its margin is 30 s, and it is extended 2 minutes ahead of now.
    state = kept(
        spec=spec(sandbox_timeout_seconds=120), ends=later(minutes=2), progress_at=later(seconds=80)
    )
    assert lease.margin(state) == timedelta(seconds=30)
    assert lease.extension_point(state) == later(seconds=90)
    assert lease.extension_target(state, later(seconds=89)) is None
    assert lease.extension_target(state, later(seconds=90)) == later(seconds=210)


def test_a_lease_longer_than_an_hour_keeps_a_15_minute_margin_and_reaches_59_minutes() -> None:
    state = kept(
        spec=spec(sandbox_timeout_seconds=3 * 3600),
        ends=later(hours=3),
        extended_at=later(hours=2),
        progress_at=later(hours=2, minutes=40),
    )
    assert lease.margin(state) == lease.MARGIN
    now = later(hours=2, minutes=45)
    assert lease.extension_target(state, now - timedelta(seconds=1)) is None
    assert lease.extension_target(state, now) == now + lease.MAX_AHEAD


def test_lease_extension_is_capped_at_the_hours_budget() -> None:
    # 1 h 15 min of hours budget: the lease may reach T0 + 75 min, not 59 min past 45 min.
    state = kept(**capped(max_hours=1.25))
    assert lease.extension_target(state, EXTENSION_POINT) == later(minutes=75)
    assert decide(state, working(), EXTENSION_POINT) == ExtendLease(until=later(minutes=75))


def test_lease_extension_is_capped_at_the_spend_budget() -> None:
    # At 45 min $0.06 is spent; $0.10 lasts 30 min more at $0.08 an hour.
    state = kept(**capped(max_spend_usd=0.10))
    target = lease.extension_target(state, EXTENSION_POINT)
    assert target is not None
    assert abs((target - later(minutes=75)).total_seconds()) < 0.01
    decision = decide(state, working(), EXTENSION_POINT)
    assert isinstance(decision, ExtendLease)
    assert abs((decision.until - later(minutes=75)).total_seconds()) < 0.01


def test_an_extension_the_budget_would_keep_under_30_seconds_is_not_asked_for() -> None:
    # The hours budget ends 29 s after the lease: not worth a request; 30 s is.
    short = kept(**capped(max_hours=(3600 + 29) / 3600))
    assert lease.extension_target(short, EXTENSION_POINT) is None
    assert isinstance(decide(short, working(), EXTENSION_POINT), Watch)
    enough = kept(**capped(max_hours=(3600 + 30) / 3600))
    assert lease.extension_target(enough, EXTENSION_POINT) == later(hours=1, seconds=30)


def test_a_short_leases_least_extension_is_its_margin() -> None:
    # A 60 s lease (margin 15 s) whose budget allows 20 s more: worth extending.
    state = kept(
        spec=spec(sandbox_timeout_seconds=60, budget=Budget(max_hours=80 / 3600)),
        budget=Budget(max_hours=80 / 3600),
        ends=later(seconds=60),
        progress_at=later(seconds=40),
    )
    target = lease.extension_target(state, later(seconds=50))
    assert target is not None
    assert abs((target - later(seconds=80)).total_seconds()) < 0.01


def test_a_stalled_agents_lease_is_left_to_end() -> None:
    # No checkpoint since the lease was last extended (at 41 min).
    state = kept(extended_at=later(minutes=41), progress_at=later(minutes=40))
    assert not lease.progressed_since_extension(state)
    assert lease.extension_target(state, EXTENSION_POINT) is None
    same_moment = kept(extended_at=later(minutes=40), progress_at=later(minutes=40))
    assert lease.extension_target(same_moment, EXTENSION_POINT) is None


def test_an_agent_that_never_checkpointed_earns_no_extension() -> None:
    state = kept(extended_at=None)
    state.progress.last_progress_at = None
    assert not lease.progressed_since_extension(state)
    assert lease.extension_target(state, EXTENSION_POINT) is None


def test_a_first_lease_never_extended_is_extended_for_any_progress() -> None:
    state = kept(extended_at=None)
    assert lease.progressed_since_extension(state)
    assert lease.extension_target(state, EXTENSION_POINT) == EXTENSION_POINT + lease.MAX_AHEAD


def test_runs_begun_before_lease_keeping_are_never_extended() -> None:
    state = kept(lease_keeping=False)
    assert lease.extension_point(state) is None
    assert lease.extension_target(state, EXTENSION_POINT) is None
    assert isinstance(decide(state, working(), EXTENSION_POINT), Watch)


def test_a_run_with_no_lease_known_is_not_extended() -> None:
    state = kept(ends=None)
    assert lease.extension_point(state) is None
    assert lease.extension_target(state, EXTENSION_POINT) is None


# ---- when the supervisor looks again ---------------------------------------------------------


def test_the_next_look_is_in_time_to_extend_the_lease() -> None:
    state = kept(progress_at=later(minutes=39))  # stalls at 54 min
    assert next_wake(state, later(minutes=40)) == EXTENSION_POINT


def test_at_the_extension_point_the_next_look_is_not_now_again() -> None:
    state = kept(progress_at=later(minutes=39))
    assert next_wake(state, EXTENSION_POINT) == later(minutes=54)


def test_a_lease_left_to_end_is_looked_at_just_after_its_end() -> None:
    state = kept(progress_at=later(minutes=50))  # stalls at 65 min
    assert next_wake(state, later(minutes=55)) == HOUR_LEASE_ENDS + lease.LEASE_END_TOLERANCE


def test_a_lease_ending_right_now_is_not_looked_at_again_for_it() -> None:
    state = kept(progress_at=later(minutes=50))
    assert next_wake(state, HOUR_LEASE_ENDS) == later(minutes=65)


def test_runs_begun_before_lease_keeping_ignore_the_lease_end_when_waking() -> None:
    state = kept(lease_keeping=False, progress_at=later(minutes=50))
    assert next_wake(state, later(minutes=55)) == later(minutes=65)


# ---- a lease end, met ----------------------------------------------------------------------


def test_a_lease_end_reported_within_five_seconds_of_now_counts_as_reached() -> None:
    state = kept()
    assert lease.lease_ended(state, HOUR_LEASE_ENDS, HOUR_LEASE_ENDS)
    assert lease.lease_ended(state, HOUR_LEASE_ENDS, HOUR_LEASE_ENDS - timedelta(seconds=5))
    assert not lease.lease_ended(state, HOUR_LEASE_ENDS, HOUR_LEASE_ENDS - timedelta(seconds=6))


def test_the_providers_lease_end_is_believed_over_the_runs_own_record() -> None:
    # The run recorded an extension to 2 h the provider never made: paused at 1 h, it is
    # the lease end, not someone pausing it.
    state = kept(ends=later(hours=2), progress_at=later(minutes=50))
    now = later(hours=1, minutes=30)
    assert lease.lease_ended(state, HOUR_LEASE_ENDS, now)
    assert decide(state, paused(HOUR_LEASE_ENDS), now) == WakeAfterLease(paused_at=HOUR_LEASE_ENDS)


def test_without_a_reported_lease_end_the_runs_own_record_is_used() -> None:
    state = kept(progress_at=later(minutes=50))
    now = later(hours=1, minutes=30)
    assert lease.lease_ended(state, None, now)
    assert lease.frozen_since(state, None, now) == HOUR_LEASE_ENDS
    assert decide(state, paused(None), now) == WakeAfterLease(paused_at=HOUR_LEASE_ENDS)


def test_a_sandbox_paused_before_its_lease_end_was_paused_from_outside() -> None:
    state = kept()
    decision = decide(state, paused(), later(minutes=50))
    assert decision == Restart("sandbox was paused from outside")


def test_runs_begun_before_lease_keeping_treat_any_pause_as_from_outside() -> None:
    state = kept(lease_keeping=False)
    now = later(hours=1, minutes=30)
    assert not lease.lease_ended(state, HOUR_LEASE_ENDS, now)
    assert decide(state, paused(), now) == Restart("sandbox was paused from outside")


def test_a_sandbox_stopped_running_at_its_lease_end_or_now_whichever_is_first() -> None:
    state = kept()
    now = later(hours=3)
    assert lease.frozen_since(state, HOUR_LEASE_ENDS, now) == HOUR_LEASE_ENDS
    # The provider's end wins over the run's record.
    assert lease.frozen_since(kept(ends=later(hours=2)), HOUR_LEASE_ENDS, now) == HOUR_LEASE_ENDS
    # An end a few seconds ahead (clocks differ): it stopped now.
    ahead = HOUR_LEASE_ENDS + timedelta(seconds=3)
    assert lease.frozen_since(state, ahead, HOUR_LEASE_ENDS) == HOUR_LEASE_ENDS
    # No end known at all: now.
    assert lease.frozen_since(kept(ends=None), None, now) == now


def test_a_sandbox_paused_at_its_lease_end_is_woken_and_the_same_agent_goes_on() -> None:
    state = kept(progress_at=later(minutes=50))
    decision = decide(state, paused(), later(hours=1, minutes=1))
    assert decision == WakeAfterLease(paused_at=HOUR_LEASE_ENDS)


def test_the_stall_is_judged_when_the_sandbox_paused_not_when_it_is_found() -> None:
    # Progress at 50 min, so a stall at 65 min; the sandbox paused at 60 min and is found
    # hours later (no worker was alive): its agent had not stalled, it is woken.
    state = kept(progress_at=later(minutes=50))
    decision = decide(state, paused(), later(hours=4))
    assert decision == WakeAfterLease(paused_at=HOUR_LEASE_ENDS)


def test_an_agent_stalled_before_its_lease_ended_gets_a_new_sandbox() -> None:
    # Progress at 40 min: stalled at 55 min, before the lease ended at 60.
    state = kept(progress_at=later(minutes=40))
    decision = decide(state, paused(), later(hours=1, minutes=1))
    assert decision == Restart("agent stalled 15 min")
    # Stalled exactly as the lease ended counts as stalled.
    at_end = kept(progress_at=later(minutes=45))
    assert decide(at_end, paused(), later(hours=1, minutes=1)) == Restart("agent stalled 15 min")


def test_a_stalled_agent_paused_at_its_lease_end_with_no_restarts_left_waits_for_a_person() -> None:
    state = kept(progress_at=later(minutes=40), restarts_used=5)
    decision = decide(state, paused(), later(hours=1, minutes=1))
    assert decision == NeedsAttention(
        "restart budget used up (5 of 5)", pending_restart="agent stalled 15 min"
    )


def test_a_sandbox_paused_at_its_lease_end_with_the_hours_used_up_waits_for_a_person() -> None:
    # The lease was capped at the hours budget's end (1 h): found paused, it is not woken.
    state = kept(progress_at=later(minutes=55), **capped(max_hours=1))
    decision = decide(state, paused(), later(hours=1, minutes=1))
    assert decision == NeedsAttention("hours budget used up (1.02 of 1 h)")


def test_a_sandbox_paused_at_its_lease_end_with_the_spend_used_up_waits_for_a_person() -> None:
    state = kept(progress_at=later(minutes=55), **capped(max_spend_usd=DEFAULT_RATE))
    decision = decide(state, paused(), later(hours=1, minutes=1))
    assert isinstance(decision, NeedsAttention)
    assert decision.reason == "spend budget used up ($0.08 of $0.08)"
    assert decision.pending_restart is None


# ---- the key's daily spending window reopening ------------------------------------------------


def test_a_run_held_by_the_daily_limit_wakes_the_sandbox_it_kept_paused() -> None:
    state = kept(daily_window_wait=True, pending_restart=None)
    assert decide_resume(state, later(hours=3)) == WakeAfterLease(paused_at=HOUR_LEASE_ENDS)
    no_end = kept(ends=None, daily_window_wait=True)
    assert decide_resume(no_end, later(hours=3)) == WakeAfterLease(paused_at=later(hours=3))


def test_a_run_held_by_the_daily_limit_before_its_sandbox_was_made_makes_it_uncounted() -> None:
    state = kept(daily_window_wait=True, sandbox_id=None)
    assert decide_resume(state, later(hours=3)) == Restart(
        "daily spending window reopened", counted=False
    )


def test_a_restart_held_by_the_daily_limit_is_carried_out_uncounted() -> None:
    state = kept(daily_window_wait=True, sandbox_id=None, pending_restart="agent crashed (exit 1)")
    assert decide_resume(state, later(hours=3)) == Restart("agent crashed (exit 1)", counted=False)


@pytest.mark.parametrize("pending", [None, "agent crashed (exit 1)"])
def test_a_daily_limit_wait_that_outlasts_the_hours_budget_waits_for_a_person(
    pending: str | None,
) -> None:
    state = kept(daily_window_wait=True, pending_restart=pending, **capped(max_hours=2))
    decision = decide_resume(state, later(hours=3))
    assert decision == NeedsAttention("hours budget used up (3.00 of 2 h)", pending_restart=pending)


def test_a_pause_whose_reported_end_an_extension_moved_is_still_its_lease_end() -> None:
    # The lease ended as the run extended it: the extension landed on the paused sandbox and
    # moved the provider's end an hour on, while the run recorded the end that paused it. It
    # is the lease end (wake the same agent), not someone pausing it (issue #36).
    moved = later(hours=2)
    now = later(hours=1, minutes=1)
    state = kept(progress_at=later(minutes=58), lease_end_either=True)
    assert lease.lease_ended(state, moved, now)
    assert decide(state, paused(moved), now) == WakeAfterLease(paused_at=HOUR_LEASE_ENDS)


def test_runs_begun_before_either_record_counts_believe_the_provider_alone() -> None:
    moved = later(hours=2)
    now = later(hours=1, minutes=1)
    state = kept(progress_at=later(minutes=58))
    assert decide(state, paused(moved), now) == Restart("sandbox was paused from outside")
