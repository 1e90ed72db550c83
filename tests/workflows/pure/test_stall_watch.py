"""A stall seen coming (workflows/pure/stall_watch.py): said from half the threshold on, in
the status and the card; the run wakes once at that half so the card says it (runs begun
with the marker only); `last progress` is the last checkpoint taken, not a new sandbox."""

from __future__ import annotations

from datetime import timedelta

from activities.models import CheckpointRead
from fakes.activities import checkpoint_ok
from tests.workflows.pure.test_decide import T0, later, running, spec
from workflows.pure.card import build_status, render_card
from workflows.pure.decide import next_wake, stall_deadline_of
from workflows.pure.run_record import take_checkpoint
from workflows.pure.stall_watch import span, stall_coming


def test_nothing_is_said_before_half_the_threshold() -> None:
    state = running(spec=spec(stall_seconds=900), progress_is_checkpoints=True)
    status = build_status(state, later(minutes=7))
    assert status.stalls_at == T0 + timedelta(minutes=15)
    assert stall_coming(status, later(minutes=7, seconds=29)) is None
    assert "stall watch" not in render_card(status, later(minutes=7))


def test_past_half_the_status_and_the_card_say_the_stall_is_coming() -> None:
    state = running(spec=spec(stall_seconds=900), progress_is_checkpoints=True)
    now = later(minutes=13, seconds=20)
    status = build_status(state, now)
    said = "no checkpoint for 13 min: stalls at 15 min"
    assert stall_coming(status, now) == said
    assert f"- **stall watch** {said} (22:15:00 UTC)" in render_card(status, now)


def test_only_a_running_agent_is_watched_for_a_stall() -> None:
    for state_name in ("needs_attention", "waiting_for_answer", "finished", "restarting"):
        state = running(state=state_name, progress_is_checkpoints=True)
        status = build_status(state, later(hours=1))
        assert status.stalls_at is None
        assert stall_coming(status, later(hours=1)) is None


def test_spans_read_as_a_person_says_them() -> None:
    assert [span(s) for s in (9.7, 119, 120, 7199, 7200, 9300)] == [
        "9 s",
        "119 s",
        "2 min",
        "119 min",
        "2 h 00 min",
        "2 h 35 min",
    ]


def test_a_run_with_the_marker_wakes_at_half_the_threshold_one_before_it_does_not() -> None:
    quiet = spec(stall_seconds=720, poll_seconds=30)
    with_marker = running(spec=quiet, progress_is_checkpoints=True)
    before = running(spec=quiet)
    assert next_wake(with_marker, T0) == later(minutes=6)
    assert next_wake(before, T0) == later(minutes=10)  # the quiet wake, before its stall
    assert stall_deadline_of(before) == later(minutes=12)
    # Past the half, the stall deadline (or the quiet wake) is the next wake again.
    assert next_wake(with_marker, later(minutes=7)) == later(minutes=12)


def test_a_threshold_too_short_for_a_wake_of_its_own_is_said_by_the_status_alone() -> None:
    # 8 min: a look lost at its half could outlast the 4 min left; the status says it all the
    # same, computed when it is asked.
    short = running(spec=spec(stall_seconds=480), progress_is_checkpoints=True)
    assert next_wake(short, T0) == later(minutes=8)
    status = build_status(short, later(minutes=5))
    assert stall_coming(status, later(minutes=5)) == "no checkpoint for 5 min: stalls at 8 min"


def test_last_progress_is_the_last_checkpoint_taken_not_a_new_sandbox() -> None:
    state = running(progress_is_checkpoints=True)
    assert build_status(state, later(seconds=21)).last_progress_at is None  # none yet
    read: CheckpointRead = checkpoint_ok('{"step": 1, "next": "two"}')
    taken, _ = take_checkpoint(state, read, later(minutes=2))
    assert taken
    assert build_status(state, later(minutes=3)).last_progress_at == later(minutes=2)
    # A new sandbox starts the stall clock again; the last progress stays where it was.
    state.progress.last_progress_at = later(minutes=5)
    assert build_status(state, later(minutes=6)).last_progress_at == later(minutes=2)
    # A run begun before the marker says the stall clock's start, as it did.
    old = running(progress_is_checkpoints=False, last_progress_at=later(minutes=5))
    assert build_status(old, later(minutes=6)).last_progress_at == later(minutes=5)
