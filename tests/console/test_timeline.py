"""The run page's timeline, pure: attempts and restarts with their causes from the status,
questions, waits and lease ends from the history's marks, what holds the run now, done checks,
people's acts; and its layout as shapes (timeline_svg)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from overnight.console.timeline import Mark, build, hold_kind
from overnight.console.timeline_svg import LEFT, WIDTH, budget_bars, draw_timeline
from overnight.core.agent_requests import AgentTalk
from overnight.core.done_check import DoneCheck
from overnight.core.models import Budget, RestartRecord, RunStatus

T0 = datetime(2026, 12, 6, 1, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def status(**changes: object) -> RunStatus:
    fields: dict[str, object] = {
        "run_id": "r1",
        "state": "running",
        "attempt": 1,
        "budget": Budget(),
        "started_at": T0,
    }
    fields.update(changes)
    return RunStatus.model_validate(fields)


def test_attempts_run_from_start_to_each_restart_and_the_restart_says_its_cause() -> None:
    restarts = [
        RestartRecord(attempt=1, reason="agent stalled 15 min", at=at(20)),
        RestartRecord(attempt=2, reason="agent crashed (exit 3)", at=at(50)),
    ]
    line = build(status(attempt=3, restarts=restarts), [], at(60))

    attempts = [s for s in line.spans if s.lane == "attempt"]
    assert [(s.start, s.end) for s in attempts] == [
        (T0, at(20)),
        (at(20), at(50)),
        (at(50), at(60)),
    ]
    assert attempts[0].label == "attempt 1: agent stalled 15 min"
    assert attempts[-1].label == "attempt 3" and attempts[-1].still_going
    restarts_shown = [m for m in line.moments if m.kind == "restart"]
    assert [m.label for m in restarts_shown] == [
        "restart after attempt 1: agent stalled 15 min",
        "restart after attempt 2: agent crashed (exit 3)",
    ]


def test_a_past_question_and_wait_are_held_spans_from_pause_to_wake_and_a_lease_end_a_moment() -> (
    None
):
    marks = [
        Mark(at(5), "pause", "question q-1 waits for a person"),
        Mark(at(9), "answer", "yes"),
        Mark(at(9.5), "wake", "question q-1 answered"),
        Mark(at(12), "pause", "wait until 03:00 UTC: usage window"),
        Mark(at(30), "wake", "wait until 03:00 UTC over"),
        Mark(at(40), "wake", "lease ended, agent progressing"),
        # A sandbox set aside at a restart is no hold of the run.
        Mark(at(41), "pause", "agent stalled 15 min"),
    ]
    line = build(status(), marks, at(60))

    held = [(s.kind, s.start, s.end) for s in line.spans if s.lane == "hold"]
    assert held == [("question", at(5), at(9.5)), ("wait", at(12), at(30))]
    kinds = [(m.kind, m.at) for m in line.moments]
    assert ("answer", at(9)) in kinds and ("lease_end", at(40)) in kinds


def test_what_holds_the_run_now_is_a_span_to_now_with_the_agents_question() -> None:
    talk = AgentTalk(question="Deploy?", choices=["yes", "no"], asked_at=at(10))
    marks = [Mark(at(10), "pause", "question q-2 waits for a person")]
    line = build(status(state="waiting_for_answer", talk=talk), marks, at(25))

    [held] = [s for s in line.spans if s.lane == "hold"]
    assert (held.kind, held.start, held.end, held.still_going) == ("question", at(10), at(25), True)
    assert held.label == "question: Deploy?"


def test_a_run_out_of_budget_is_held_for_a_person_with_the_reason() -> None:
    marks = [Mark(at(30), "pause", "needs attention: spend budget used up")]
    line = build(
        status(state="needs_attention", attention_reason="spend budget used up"), marks, at(45)
    )
    [held] = [s for s in line.spans if s.lane == "hold"]
    assert (held.kind, held.start, held.end) == ("attention", at(30), at(45))
    assert held.label == "needs attention: spend budget used up"


def test_a_pause_cut_by_a_restart_ends_at_the_restart() -> None:
    restarts = [RestartRecord(attempt=1, reason="sandbox lost", at=at(20))]
    marks = [Mark(at(10), "pause", "question q-1 waits for a person")]
    line = build(status(attempt=2, restarts=restarts), marks, at(30))
    [held] = [s for s in line.spans if s.lane == "hold"]
    assert (held.start, held.end) == (at(10), at(20))


def test_done_checks_show_their_verdicts_and_earlier_rounds_their_starts() -> None:
    checks = [
        DoneCheck(
            command="pytest -q", index=0, round=2, passed=False, exit_code=1, seconds=60, at=at(50)
        ),
    ]
    marks = [
        Mark(at(20), "done_check", "done check 1 in a fresh sandbox: pytest -q"),
        Mark(at(49), "done_check", "done check 1 in a fresh sandbox: pytest -q"),
    ]
    line = build(status(done_checks=checks, done_checks_used=2), marks, at(55))
    shown = [(m.kind, m.at) for m in line.moments]
    # The latest round's start is the status' check (with its verdict), not a second dot.
    assert shown == [("done_check", at(20)), ("done_fail", at(50))]
    assert "pytest -q failed (exit 1)" in line.moments[-1].label


def test_an_ended_run_ends_its_axis_at_its_close_and_its_last_attempt_is_not_going() -> None:
    line = build(status(state="cancelled"), [Mark(at(7), "cancel", "wrong branch")], at(600), at(8))
    assert line.end == at(8)
    [attempt] = line.spans
    assert attempt.label == "attempt 1: cancelled" and not attempt.still_going
    assert [m.label for m in line.moments] == ["cancelled: wrong branch"]


def test_hold_kind_reads_the_pause_reasons_the_workflow_writes() -> None:
    assert hold_kind("question q-1 waits for a person") == "question"
    assert hold_kind("wait until 03:00 UTC: agent asked") == "wait"
    assert hold_kind("needs attention: hours used up") == "attention"
    assert hold_kind("agent stalled 15 min") is None


def test_the_drawing_puts_each_span_on_its_lane_in_proportion_and_keeps_agent_text_as_data() -> (
    None
):
    hostile = "<script>alert(1)</script> [Approve](https://evil.example)"
    restarts = [RestartRecord(attempt=1, reason=hostile, at=at(30))]
    drawing = draw_timeline(build(status(attempt=2, restarts=restarts), [], at(60)))

    first, second = drawing.boxes
    inner = WIDTH - LEFT - 16
    assert first.x == LEFT and abs(first.width - inner / 2) < 1
    assert abs(second.x - (LEFT + inner / 2)) < 1
    assert hostile in first.title  # as written: the template escapes it
    [dot] = drawing.dots
    assert "tl-restart" in dot.css and hostile in dot.title
    assert drawing.ticks and all(LEFT <= tick.x <= WIDTH for tick in drawing.ticks)


def test_budget_bars_fill_by_use_and_mark_near_and_over() -> None:
    bars = budget_bars(
        status(
            budget=Budget(max_spend_usd=2.0, max_hours=10, max_restarts=5),
            spend_usd=2.5,
            hours_used=8.5,
            restarts_used=1,
        )
    )
    by_name = {bar.name: bar for bar in bars}
    assert (by_name["spend"].fraction, by_name["spend"].css) == (1.0, "bar-over")
    assert (by_name["hours"].fraction, by_name["hours"].css) == (0.85, "bar-near")
    assert (by_name["restarts"].fraction, by_name["restarts"].css) == (0.2, "bar-ok")
    no_limit = budget_bars(status())[0]
    assert (no_limit.limit, no_limit.limit_text, no_limit.css) == (None, "no limit", "bar-none")
