"""CI rounds, pure (`workflows.pure.ci`, `overnight.core.ci_rounds`, `decide.decide_resume`): what a
look at the pull request's checks means (finish, a round told the failing check, a person past
`max_ci_rounds` or the watch's deadline, or watch on); CI waits are not run hours; what the
status, the card and the agent are told. And a failed keep held (`workflows.pure.workspace`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from activities.models import Observation
from activities.models.delivery import ChecksSeen
from overnight.agent_kit import overnight_agent
from overnight.core import ci_rounds
from overnight.core.ci_rounds import CiView, FailingCheck
from overnight.core.models import BudgetExtension, RunSpec
from overnight.core.workspace_spec import KeptWorkspace
from tests.workflows.pure.fields import put
from workflows.pure import budget, ci, workspace
from workflows.pure.card import build_status, render_card
from workflows.pure.decide import DeliverAgain, KeepAgain, NeedsAttention, decide, decide_resume
from workflows.pure.state import SupervisorState

T0 = datetime(2026, 1, 1, 22, 0, tzinfo=UTC)
PUSHED = "b" * 40
TESTS = FailingCheck(name="tests", title="1 failed", log_tail="x" * 9000 + "\nFAILED test_due")


def spec(**overrides: Any) -> RunSpec:
    return RunSpec.model_validate(
        {
            "run_id": "pure-ci",
            "repo": "https://github.com/octo/app.git",
            "agent_dir": "/tmp/agent",
            "command": "true",
            "pull_request": {"until_checks_pass": True},
            **overrides,
        }
    )


def state(**fields: Any) -> SupervisorState:
    run = spec(**fields.pop("spec", {}))
    s = SupervisorState(spec=run, budget=run.budget, started_at=T0, attempt=1)
    s.delivery.finish_pushes, s.ci.ci_watching, s.delivery.pushed_commit, s.sandbox_id = (
        True,
        True,
        PUSHED,
        "box-1",
    )
    return put(s, **fields)


def seen(verdict: str, **fields: Any) -> ChecksSeen:
    return ChecksSeen(commit=PUSHED, verdict=verdict, polls=2, **fields)  # type: ignore[arg-type]


def test_only_a_run_whose_pull_request_asks_watches_ci() -> None:
    assert ci.wanted(state())
    assert not ci.wanted(state(spec={"pull_request": {}}))
    assert not ci.wanted(state(finish_pushes=False))
    assert ci.view(state(spec={"pull_request": {}})) is None
    assert ci.view(state(ci_watching=False)) is None


def test_passing_checks_finish_and_are_shown() -> None:
    s = state()
    ci.begin_watch(s, T0)
    after = ci.after_look(s, seen("success", passed=["tests", "lint"]), T0 + timedelta(minutes=3))
    assert isinstance(after, ci.Passed)
    view = ci.view(s)
    assert view is not None
    assert (view.state, view.commit, view.passed, view.polls) == (
        "passed",
        PUSHED,
        ["tests", "lint"],
        2,
    )
    assert ci_rounds.ci_line(view) == f"passed on {PUSHED[:12]} (round 0 of 3): tests, lint"


def test_a_failing_check_is_a_round_told_its_name_and_log_tail() -> None:
    s = state()
    ci.begin_watch(s, T0)
    after = ci.after_look(s, seen("failure", failing=[TESTS]), T0 + timedelta(minutes=5))
    assert isinstance(after, ci.CiRound)
    assert after.reason == "CI check failed (round 1): tests (failure): 1 failed"
    assert after.reason.startswith(overnight_agent.CI_CHECK_REASON)  # what the kit reads
    assert "check: tests" in after.told and after.told.endswith("FAILED test_due\n")
    assert len(after.told) < 7000  # the log's tail, not all of it
    # The status keeps less of the log than the agent is told.
    view = ci.view(s)
    assert view is not None and view.failing is not None
    assert len(view.failing.log_tail) == ci_rounds.SHOWN_TAIL_CHARS
    assert s.ci.ci_failed == ["tests (failure): 1 failed"]
    ci.started_again(s)
    assert (s.ci.ci_rounds_used, s.ci.ci_told, s.delivery.pushed_commit, s.delivery.push_at) == (
        1,
        None,
        None,
        None,
    )


def test_past_max_ci_rounds_a_person_is_needed_and_an_extension_gives_a_round() -> None:
    s = state(ci_rounds_used=3)
    ci.begin_watch(s, T0)
    after = ci.after_look(s, seen("failure", failing=[TESTS]), T0)
    assert (
        after
        == "CI checks still failing after 3 rounds of 3 allowed: last, tests (failure): 1 failed"
    )
    s.budget = budget.extended(s.budget, BudgetExtension(ci_rounds=1))
    verdict = ci.verdict(s, T0)
    assert isinstance(verdict, ci.CiRound) and "(round 4)" in verdict.reason


def test_a_run_out_of_hours_needs_a_person_rather_than_a_round() -> None:
    s = state(spec={"budget": {"max_hours": 1}})
    ci.begin_watch(s, T0 + timedelta(hours=2))
    s.ci.ci_waiting_since = None  # the watch is over; two hours of run time are used
    s.ci.ci_told = "told"
    s.ci.ci_view = CiView(commit=PUSHED, state="failing", failing=TESTS)
    verdict = ci.verdict(s, T0 + timedelta(hours=2))
    assert isinstance(verdict, str) and verdict.startswith("hours budget")


def test_checks_pending_past_attention_hours_or_never_reported_need_a_person() -> None:
    s = state(spec={"attention_hours": 2})
    ci.begin_watch(s, T0)
    assert ci.after_look(s, seen("pending", pending=["slow"]), T0 + timedelta(hours=1)) is None
    late = ci.after_look(s, seen("pending", pending=["slow"]), T0 + timedelta(hours=2))
    assert late == f"CI checks of {PUSHED[:12]} still pending after 2 h (slow)"
    quiet = state()
    ci.begin_watch(quiet, T0)
    assert ci.after_look(quiet, seen("none"), T0 + timedelta(minutes=5)) is None
    none = ci.after_look(quiet, seen("none"), T0 + timedelta(minutes=15))
    assert isinstance(none, str) and none.startswith(f"no CI check was reported on {PUSHED[:12]}")


def test_a_watch_window_ends_at_the_first_report_and_the_deadline() -> None:
    s = state(spec={"attention_hours": 1})
    ci.begin_watch(s, T0)
    most = timedelta(minutes=10)
    assert ci.window_seconds(s, T0 + timedelta(minutes=14), most) == 60
    s.ci.ci_view = CiView(commit=PUSHED, state="pending", polls=4)
    assert ci.window_seconds(s, T0 + timedelta(minutes=14), most) == 600
    assert ci.window_seconds(s, T0 + timedelta(minutes=55), most) == 300
    assert ci.window_seconds(s, T0 + timedelta(hours=2), most) == 0
    assert ci.poll_seconds(state(spec={"poll_seconds": 1})) == 1
    assert ci.poll_seconds(state(spec={"poll_seconds": 600})) == 60


def test_waiting_on_ci_is_not_run_time_and_the_status_says_what_it_waits_on() -> None:
    s = state()
    ci.begin_watch(s, T0 + timedelta(hours=1))
    now = T0 + timedelta(hours=3)
    assert budget.hours_used(s, now) == 1
    status = build_status(s, now)
    assert status.waiting_on == f"CI checks of {PUSHED[:12]} (round 0 of 3), pending"
    assert f"**CI** pending on {PUSHED[:12]} (round 0 of 3)" in render_card(status, now)
    ci.end_watch(s, now)
    assert s.ci.ci_waited_seconds == 7200 and budget.hours_used(s, now + timedelta(hours=1)) == 2


def test_the_pull_request_is_brought_up_to_date_after_a_round() -> None:
    s = state(pull_request_commit=PUSHED)
    assert not ci.pull_request_behind(s)
    s.delivery.pushed_commit = "c" * 40
    assert ci.pull_request_behind(s)
    assert not ci.pull_request_behind(state(ci_watching=None, pull_request_commit=None))


def test_an_extension_while_ci_waits_acts_on_ci_again() -> None:
    s = state(delivery_waits="checks", paused_in_place=True)
    assert isinstance(decide_resume(s, T0), DeliverAgain)


KEPT_FAILED = KeptWorkspace(number=3, outcome="failed", at=T0, attempt=1, detail="push refused")


def test_a_failed_keep_holds_a_running_agent_and_an_extension_keeps_again() -> None:
    s = state(keep_waits=3, workspace_kept=[KEPT_FAILED], process_id="agent-1")
    running = Observation(process_state="running", sandbox_state="running")
    held = decide(s, running, T0)
    assert isinstance(held, NeedsAttention) and held.in_place
    assert held.reason.startswith(
        "the workspace kept at checkpoint 3 could not be pushed to the origin: push refused"
    )
    assert isinstance(decide_resume(s, T0), KeepAgain)
    # The agent's exit 0 finishes (its finish pushes the work), the hold or not.
    exited = Observation(process_state="exited", exit_code=0, sandbox_state="running")
    assert not isinstance(decide(s, exited, T0), NeedsAttention)
    assert not workspace.held(state(keep_waits=None))
