"""What `overnight status` prints about a sandbox's lease and what the run costs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from overnight.cli.render import result_text, status_text
from overnight.core.models import Budget, DailyLimit, RunResult, RunStatus

NOW = datetime(2026, 11, 30, 14, 0, tzinfo=UTC)


def status(**changes: object) -> RunStatus:
    fields: dict[str, object] = {
        "run_id": "r",
        "state": "running",
        "attempt": 1,
        "budget": Budget(),
        "started_at": NOW - timedelta(hours=3),
    }
    return RunStatus.model_validate(fields | changes)


def test_status_says_when_the_lease_ends_and_how_often_it_was_woken_at_its_end() -> None:
    text = status_text(
        status(lease_ends_at=NOW + timedelta(minutes=42), lease_resumes=2), now=NOW, ui_url=None
    )
    assert "lease ends:    in 42m (14:42 UTC), woken 2x at its end" in text


def test_a_finished_run_shows_no_lease() -> None:
    text = status_text(
        status(state="finished", lease_ends_at=NOW + timedelta(minutes=5)), now=NOW, ui_url=None
    )
    assert "lease ends" not in text


def test_status_shows_what_the_provider_charged_beside_the_estimate_and_the_daily_limit() -> None:
    daily = DailyLimit(limit_usd=25.0, used_usd=3.1, remaining_usd=21.9, read_at=NOW)
    text = status_text(
        status(spend_usd=1.26, spend_charged_usd=1.2, spend_estimated_usd=0.9, daily_limit=daily),
        now=NOW,
        ui_url=None,
    )
    assert "charged:       $1.20 by the provider (estimate $0.90)" in text
    assert "daily limit $25.00: $3.10 used, $21.90 left" in text


def test_status_says_a_run_waits_for_the_daily_window() -> None:
    daily = DailyLimit(limit_usd=5.0, used_usd=5.0, remaining_usd=0.0, read_at=NOW)
    text = status_text(
        status(state="needs_attention", daily_limit=daily, waiting_for_daily_window=True),
        now=NOW,
        ui_url=None,
    )
    assert "$0.00 left · waiting for the daily window to reopen" in text


def test_a_local_run_shows_no_charges() -> None:
    assert "charged:" not in status_text(status(spend_usd=0.4), now=NOW, ui_url=None)


def test_status_and_result_say_what_the_safety_net_cost() -> None:
    from overnight.cli.render import result_text
    from overnight.core.models import RunResult
    from overnight.core.run_costs import SafetyNet

    net = SafetyNet(
        restarts=2,
        lost_seconds=960,
        setup_seconds=75,
        usd=0.023,
        sandbox_usd=0.0793,
        share=0.29,
        by_cause={"stalled": 1, "crashed": 1},
    )
    text = status_text(status(safety_net=net), now=NOW, ui_url=None)
    line = (
        "  safety net:    $0.0230 (29.0% of the sandbox cost): 2 restart(s) (1 crashed, "
        "1 stalled), 960 s of work lost, 75 s of setup"
    )
    assert line in text.splitlines()
    # No restart yet, or a run begun before the figure was kept: no line.
    assert "safety net" not in status_text(status(safety_net=SafetyNet()), now=NOW, ui_url=None)
    assert "safety net" not in status_text(status(), now=NOW, ui_url=None)
    result = RunResult(
        run_id="r",
        outcome="finished",
        attempts=3,
        restarts=2,
        hours_used=1,
        spend_usd=0.0793,
        safety_net=net,
    )
    assert (
        result_text(result).splitlines()[1] == "safety net: " + line.split("safety net:")[1].strip()
    )


def test_status_and_result_name_the_pushed_commit_and_the_pull_request() -> None:
    url = "https://github.com/octo/app/pull/7"
    text = status_text(
        status(state="finished", pushed_commit="b" * 40, pull_request_url=url),
        now=NOW,
        ui_url=None,
    )
    assert "  pushed:        bbbbbbbbbbbb, on the origin" in text
    assert f"  pull request:  {url}" in text
    result = RunResult(
        run_id="r",
        outcome="finished",
        attempts=1,
        restarts=0,
        hours_used=0.5,
        spend_usd=0.1,
        pushed_commit="b" * 40,
        pull_request_url=url,
    )
    said = result_text(result).splitlines()
    assert said[1:] == ["  pushed: bbbbbbbbbbbb, on the origin", f"  pull request: {url}"]
    # Not pushed (yet): nothing said.
    assert "pushed" not in status_text(status(), now=NOW, ui_url=None)


def test_status_and_result_say_the_ci_round_and_the_failing_check() -> None:
    from overnight.core.ci_rounds import CiView, FailingCheck

    failing = CiView(
        commit="3f2a9c01d4e5" + "0" * 28,
        state="failing",
        rounds_used=1,
        max_rounds=3,
        failing=FailingCheck(name="tests", title="1 failed"),
    )
    text = status_text(status(state="needs_attention", ci=failing), now=NOW, ui_url=None)
    assert "  CI:            failing on 3f2a9c01d4e5 (round 1 of 3): tests (failure): 1 failed" in (
        text.splitlines()
    )
    passed = failing.model_copy(update={"state": "passed", "passed": ["tests"], "failing": None})
    result = RunResult(
        run_id="r", outcome="finished", attempts=1, restarts=0, hours_used=1, spend_usd=0, ci=passed
    )
    assert "  CI: passed on 3f2a9c01d4e5 (round 1 of 3): tests" in result_text(result).splitlines()
    assert "CI" not in status_text(status(), now=NOW, ui_url=None)
