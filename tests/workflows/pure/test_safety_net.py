"""What the safety net cost, pure: each restart's lost work and setup, priced at the run's rates,
and its share of the sandbox cost. The figures are checked against sums done by hand.

The default sandbox costs $0.08 an hour (2 vCPU x $0.025 + 4 GiB x $0.0075).
"""

from __future__ import annotations

import pytest

from overnight.core.models import RestartRecord
from tests.workflows.pure.test_decide import DEFAULT_RATE, T0, later, running
from workflows.pure import budget, safety_net
from workflows.pure.safety_net import cause_of
from workflows.pure.state import SupervisorState


def kept(**overrides: object) -> SupervisorState:
    return running(safety_net_kept=True, **overrides)


def crash_and_restart(state: SupervisorState, *, noticed: float, running_at: float) -> None:
    """What AgentRun does, in order: the restart's record, the set-aside (the sandbox's spend
    closed), the new sandbox's start; times in minutes after T0."""
    reason = "agent crashed (exit 3)"
    state.attempts.restarts.append(
        RestartRecord(attempt=state.attempt, reason=reason, at=later(minutes=noticed))
    )
    safety_net.noticed(state, later(minutes=noticed))
    budget.close_sandbox_spend(state, later(minutes=noticed))
    state.sandbox_id = None
    state.attempt += 1
    state.sandbox_id = f"box-{state.attempt}"
    safety_net.restarted(state, later(minutes=running_at))
    state.sandbox.sandbox_started_at = later(minutes=running_at)
    state.progress.last_progress_at = later(minutes=running_at)


def test_a_crash_costs_the_work_since_the_checkpoint_and_the_setup_by_hand() -> None:
    # Sandbox 1 from 22:00, its last checkpoint at 22:10, the crash noticed at 22:25; the new
    # agent runs at 22:25:30; the run is looked at at 23:00.
    state = kept(progress_at=later(minutes=10))
    crash_and_restart(state, noticed=25, running_at=25.5)
    net = safety_net.summary(state, later(hours=1))
    assert net is not None
    # By hand: 15 min lost + 30 s setup = 930 s at $0.08/h = $0.0206667.
    assert (net.restarts, net.lost_seconds, net.setup_seconds) == (1, 900, 30)
    assert net.usd == pytest.approx(930 / 3600 * 0.08, abs=1e-6)
    assert net.usd == pytest.approx(0.020667, abs=1e-6)
    # The sandboxes: 25 min of box 1 + 34.5 min of box 2 = 59.5 min at $0.08/h = $0.079333.
    assert net.sandbox_usd == pytest.approx(59.5 / 60 * 0.08, abs=1e-6)
    assert net.share == pytest.approx(0.020667 / 0.079333, abs=1e-4)
    assert net.share == pytest.approx(0.2605, abs=1e-4)
    assert net.by_cause == {"crashed": 1}
    [one] = net.recent
    assert (one.attempt, one.reason, one.cause) == (2, "agent crashed (exit 3)", "crashed")


def test_two_restarts_add_up() -> None:
    state = kept(progress_at=later(minutes=10))
    crash_and_restart(state, noticed=25, running_at=26)  # 900 s + 60 s
    state.progress.last_progress_at = later(minutes=40)
    crash_and_restart(state, noticed=41, running_at=41.25)  # 60 s + 15 s
    net = safety_net.summary(state, later(hours=1))
    assert net is not None
    assert (net.restarts, net.lost_seconds, net.setup_seconds) == (2, 960, 75)
    assert net.usd == pytest.approx(1035 / 3600 * DEFAULT_RATE, abs=2e-6)
    assert [cost.attempt for cost in net.recent] == [2, 3]


def test_a_wait_for_a_person_between_noticed_and_restarted_is_no_setup() -> None:
    state = kept(progress_at=later(minutes=10))
    state.attempts.restarts.append(
        RestartRecord(attempt=1, reason="agent stalled 15 min", at=later(minutes=25))
    )
    safety_net.noticed(state, later(minutes=25))
    state.attention.attention_seconds += 8 * 3600  # out of restarts: 8 h until a person extended it
    state.attempt = 2
    safety_net.restarted(state, later(hours=8, minutes=26))
    net = safety_net.summary(state, later(hours=9))
    assert net is not None
    assert (net.lost_seconds, net.setup_seconds) == (900, 60)
    assert net.by_cause == {"stalled": 1}


def test_a_sandbox_paused_at_its_lease_end_loses_only_the_time_it_ran() -> None:
    state = kept(
        progress_at=later(minutes=10), sandbox_paused=True, lease_ends_at=later(minutes=20)
    )
    state.attempts.restarts.append(
        RestartRecord(attempt=1, reason="agent stalled 15 min", at=later(hours=2))
    )
    safety_net.noticed(state, later(hours=2))
    state.attempt = 2
    safety_net.restarted(state, later(hours=2, seconds=10))
    net = safety_net.summary(state, later(hours=3))
    assert net is not None and net.lost_seconds == 600 and net.setup_seconds == 10


def test_no_restart_no_cost_and_runs_begun_before_have_no_figure() -> None:
    net = safety_net.summary(kept(), later(hours=1))
    assert net is not None and (net.restarts, net.usd) == (0, 0)
    assert net.share == 0 and net.sandbox_usd == pytest.approx(DEFAULT_RATE)
    assert safety_net.summary(running(), later(hours=1)) is None
    # Nothing noticed before a run's first sandbox: its start is no restart.
    state = kept()
    safety_net.restarted(state, later(minutes=1))
    assert state.net.net_totals.restarts == 0


def test_a_set_aside_without_a_restart_after_it_costs_nothing() -> None:
    state = kept(progress_at=later(minutes=10))
    safety_net.noticed(state, later(minutes=25))  # out of budget; then cancelled
    net = safety_net.summary(state, later(hours=1))
    assert net is not None and net.restarts == 0 and net.usd == 0
    assert state.net.net_lost_seconds == 900  # pending, never charged


def test_the_share_is_left_out_while_the_sandboxes_cost_nothing() -> None:
    net = safety_net.summary(kept(), T0)
    assert net is not None and net.share is None


@pytest.mark.parametrize(
    ("reason", "cause"),
    [
        ("agent crashed (exit 1)", "crashed"),
        ("agent was killed", "crashed"),
        ("agent process is gone", "crashed"),
        ("agent stalled 15 min", "stalled"),
        ("sandbox time limit reached", "time_limit"),
        ("sandbox paused at its lease end and could not be woken", "time_limit"),
        ("sandbox 3 ended before the agent started", "time_limit"),
        ("sandbox stopped answering (timeout)", "sandbox_failed"),
        ("sandbox disappeared", "sandbox_failed"),
        ("sandbox was paused from outside", "sandbox_failed"),
        ("could not start the agent again: boom", "sandbox_failed"),
        ("fresh-context starts used up (50)", "fresh_starts_used_up"),
        ("resumed after the budget was extended", "resumed"),
        ("daily spending window reopened", "resumed"),
        ("something new", "other"),
    ],
)
def test_causes(reason: str, cause: str) -> None:
    assert cause_of(reason) == cause


def test_the_share_is_of_the_sandboxes_figure_charges_included_model_spend_never() -> None:
    from overnight.core.models import RunSpec
    from workflows.pure.state_groups import ChargeFigure

    base = running().spec.model_dump()
    state = kept(spec=RunSpec(**{**base, "provider": "runtime"}))
    state.money.charges["box-1"] = ChargeFigure(
        micros=50_000, estimated_usd=0.04, read_at=later(hours=0.5)
    )
    now = later(hours=1)
    # Today the spend budget counts sandboxes only: the two figures agree (charges swapped in).
    assert safety_net.sandbox_usd(state, now) == pytest.approx(budget.spend_usd(state, now))
    assert safety_net.sandbox_usd(state, now) == pytest.approx(DEFAULT_RATE + 0.05 - 0.04)


def test_nothing_is_noticed_without_a_sandbox_or_in_a_run_begun_before() -> None:
    between = kept(sandbox_id=None)
    safety_net.noticed(between, later(minutes=5))
    assert between.net.net_noticed_at is None
    before = running()
    safety_net.noticed(before, later(minutes=5))
    assert before.net.net_noticed_at is None and before.net.net_lost_seconds == 0


def test_a_failure_noticed_twice_counts_from_the_first_time() -> None:
    state = kept(progress_at=later(minutes=10))
    safety_net.noticed(state, later(minutes=25))
    safety_net.noticed(state, later(minutes=40))
    assert (state.net.net_noticed_at, state.net.net_lost_seconds) == (later(minutes=25), 900)


def test_a_running_sandbox_loses_all_its_time_since_the_save_whatever_its_lease() -> None:
    # Its lease was to end at 22:20, but it was extended and it never paused.
    state = kept(progress_at=later(minutes=10), lease_ends_at=later(minutes=20))
    safety_net.noticed(state, later(minutes=30))
    assert state.net.net_lost_seconds == 1200


def test_with_no_checkpoint_taken_the_work_lost_is_since_the_sandbox_started() -> None:
    state = kept(last_progress_at=None)
    safety_net.noticed(state, later(minutes=7))
    assert state.net.net_lost_seconds == 420


def test_noticed_at_the_last_save_loses_nothing_and_an_instant_restart_has_no_setup() -> None:
    state = kept(progress_at=later(minutes=10))
    safety_net.noticed(state, later(minutes=10))
    safety_net.restarted(state, later(minutes=10))
    [cost] = state.net.net_totals.recent
    assert (cost.lost_seconds, cost.setup_seconds, cost.usd) == (0, 0, 0)


def test_a_wait_for_a_person_before_the_failure_takes_nothing_off_its_setup() -> None:
    state = kept(progress_at=later(minutes=10), attention_seconds=3600.0)
    safety_net.noticed(state, later(hours=2))
    safety_net.restarted(state, later(hours=2, minutes=1))
    assert state.net.net_totals.setup_seconds == 60


def test_a_restart_with_no_record_of_why_is_counted_as_a_restart() -> None:
    state = kept(progress_at=later(minutes=10))
    safety_net.noticed(state, later(minutes=20))
    safety_net.restarted(state, later(minutes=21))
    [cost] = state.net.net_totals.recent
    assert (cost.reason, cost.cause) == ("restart", "other")


def test_restarts_of_one_cause_are_counted_together() -> None:
    state = kept(progress_at=later(minutes=10))
    crash_and_restart(state, noticed=20, running_at=21)
    crash_and_restart(state, noticed=30, running_at=31)
    assert state.net.net_totals.by_cause == {"crashed": 2}


def test_the_figures_are_kept_to_the_millisecond_and_the_billionth_of_a_dollar() -> None:
    state = kept(progress_at=later(minutes=10))
    state.attempts.restarts.append(RestartRecord(attempt=1, reason="agent crashed (exit 3)", at=T0))
    noticed, running_at = later(minutes=25, seconds=0.2504), later(minutes=25.5, seconds=0.001)
    safety_net.noticed(state, noticed)  # 900.2504 s lost
    budget.close_sandbox_spend(state, noticed)
    safety_net.restarted(state, running_at)  # 29.7506 s of setup
    state.sandbox.sandbox_started_at = running_at
    [cost] = state.net.net_totals.recent
    assert (cost.lost_seconds, cost.setup_seconds, cost.usd) == (900.25, 29.751, 0.020666689)
    totals = state.net.net_totals
    assert (totals.lost_seconds, totals.setup_seconds, totals.usd) == (900.25, 29.751, 0.020666689)
    net = safety_net.summary(state, later(hours=1))
    assert net is not None and (net.sandbox_usd, net.share) == (0.079338876, 0.2605)


def test_the_state_after_a_restart_carries_over_continue_as_new() -> None:
    state = kept(progress_at=later(minutes=10))
    crash_and_restart(state, noticed=25, running_at=26)
    assert SupervisorState.model_validate_json(state.model_dump_json()) == state
