"""Snapshot recovery's pure decisions: when to capture, what a restart restores, what is
deleted, what storage costs, and how the status shows it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from activities.models import Observation
from overnight.core.models import SnapshotRecord
from tests.workflows.harness import make_spec
from workflows.pure import budget
from workflows.pure.card import build_status, render_card
from workflows.pure.decide import TakeSnapshot, Watch, decide
from workflows.pure.snapshot import capture_due, next_capture_at, requested, restore_for, superseded
from workflows.pure.state import SupervisorState
from workflows.pure.state_groups import ProgressState, SandboxState

T0 = datetime(2026, 11, 30, 12, tzinfo=UTC)
RUNNING = Observation(process_state="running", sandbox_state="running")


def state(checkpoint: str | None = None, **spec: object) -> SupervisorState:
    s = SupervisorState(
        spec=make_spec(recovery="snapshot", snapshot_every_seconds=600, **spec),  # type: ignore[arg-type]
        budget=make_spec().budget,
        started_at=T0,
        attempt=1,
        sandbox_id="box-1",
        process_id="p-1",
        sandbox=SandboxState(sandbox_started_at=T0),
        progress=ProgressState(last_progress_at=T0),
    )
    s.progress.checkpoint = checkpoint
    s.progress.checkpoint_digest = None if checkpoint is None else str(hash(checkpoint))
    return s


def record(n: int, at: datetime = T0, size: int = 2**30) -> SnapshotRecord:
    return SnapshotRecord(
        snapshot_id=f"snap-{n}", mode="disk", taken_at=at, size_bytes=size, attempt=1
    )


def test_the_agents_request_is_read_from_its_checkpoint() -> None:
    assert requested(json.dumps({"snapshot_request": 3})) == 3
    assert requested(json.dumps({"snapshot_request": True})) == 0
    assert requested("not json snapshot_request") == 0
    assert requested(None) == 0


def test_a_request_is_answered_once_and_the_interval_holds_the_next() -> None:
    s = state(json.dumps({"snapshot_request": 1}))
    assert decide(s, RUNNING, T0) == TakeSnapshot(request=1)
    s.snapshot.snapshot_request_done, s.snapshot.snapshot_last_try_at = 1, T0
    assert capture_due(s, T0 + timedelta(seconds=1)) is None
    s.progress.checkpoint = json.dumps({"snapshot_request": 2})
    soon = T0 + timedelta(seconds=5)
    assert capture_due(s, soon) is None
    assert next_capture_at(s, soon) == T0 + timedelta(seconds=600)
    wait = decide(s, RUNNING, soon)
    assert isinstance(wait, Watch) and wait.until == T0 + timedelta(seconds=600)
    assert capture_due(s, T0 + timedelta(seconds=600)) == TakeSnapshot(request=2)


def test_automatic_captures_need_a_declaration_and_a_new_checkpoint() -> None:
    s = state("{}")
    assert capture_due(s, T0) is None
    s = state("{}", snapshot_on_checkpoint=True)
    assert capture_due(s, T0) == TakeSnapshot(request=0)
    s.snapshot.snapshot_checkpoint_digest = s.progress.checkpoint_digest
    assert capture_due(s, T0 + timedelta(hours=1)) is None


def test_no_capture_of_a_paused_sandbox_or_in_checkpoint_mode() -> None:
    s = state(json.dumps({"snapshot_request": 1}))
    s.sandbox.sandbox_paused = True
    assert capture_due(s, T0) is None
    s = state(json.dumps({"snapshot_request": 1}))
    s.spec = make_spec()
    assert capture_due(s, T0) is None and restore_for(s) is None


def test_a_restart_restores_the_latest_ready_snapshot_or_none() -> None:
    s = state()
    assert restore_for(s) is None
    s.snapshot.snapshots = [
        record(1),
        record(2).model_copy(update={"fresh_start": 2, "request": 4}),
    ]
    restore = restore_for(s)
    assert restore is not None and restore.snapshot_id == "snap-2" and restore.request == 4
    assert restore.adopt_start_key == f"{s.spec.run_id}-1-2"


def test_the_latest_two_are_kept_once_a_newer_one_is_ready() -> None:
    s = state()
    assert superseded(s) == []
    s.snapshot.snapshots = [record(1)]
    assert superseded(s) == []
    s.snapshot.snapshots = [record(1), record(2)]
    assert superseded(s) == ["snap-1"]


def test_snapshot_storage_counts_in_the_spend_estimate_and_stays_after_deletion() -> None:
    s = state()
    later = T0 + timedelta(hours=10)
    without = budget.spend_usd(s, later)
    s.snapshot.snapshots = [record(1), record(2)]
    rate = s.spec.rates.snapshot_gib_hour_usd
    assert budget.spend_usd(s, later) - without == pytest.approx(2 * 10 * rate)
    budget.close_snapshot_spend(s, ["snap-1"], later)
    assert [r.snapshot_id for r in s.snapshot.snapshots] == ["snap-2"]
    assert budget.spend_usd(s, later) - without == pytest.approx(2 * 10 * rate)


def test_the_status_and_card_show_the_latest_snapshot_and_its_age() -> None:
    s = state()
    s.snapshot.snapshots = [record(1, at=T0)]
    s.snapshot.snapshots_taken, s.snapshot.snapshot_pause_seconds = 1, 1.5
    now = T0 + timedelta(minutes=7)
    status = build_status(s, now)
    assert status.latest_snapshot is not None and status.latest_snapshot.snapshot_id == "snap-1"
    assert [r.size_bytes for r in status.snapshots] == [2**30]
    card = render_card(status, now)
    assert "**snapshot** `snap-1` (disk, 1024.0 MiB) taken 7m ago · 1 taken, paused 1.5 s" in card


def test_no_capture_while_no_agent_runs_in_the_sandbox() -> None:
    s = state(json.dumps({"snapshot_request": 1}))
    s.process_id = None  # made, its agent not started yet (or ended)
    assert capture_due(s, T0) is None
    s = state(json.dumps({"snapshot_request": 1}))
    s.sandbox_id = None
    assert capture_due(s, T0) is None


def test_a_capture_held_back_is_due_at_the_end_of_the_interval_and_none_is_when_not_wanted() -> (
    None
):
    s = state(json.dumps({"snapshot_request": 2}))
    s.snapshot.snapshot_request_done, s.snapshot.snapshot_last_try_at = 1, T0
    due_at = T0 + timedelta(seconds=600)
    assert next_capture_at(s, due_at - timedelta(seconds=1)) == due_at
    assert next_capture_at(s, due_at) is None  # due now: nothing to wait for
    s.snapshot.snapshot_request_done = 2  # answered: nothing wanted
    assert next_capture_at(s, T0 + timedelta(seconds=5)) is None


def test_a_restart_restores_the_newest_of_several_in_its_own_mode() -> None:
    s = state()
    newest = record(3).model_copy(update={"mode": "memory"})
    s.snapshot.snapshots = [record(1), record(2), newest]
    restore = restore_for(s)
    assert restore is not None and (restore.snapshot_id, restore.mode) == ("snap-3", "memory")
