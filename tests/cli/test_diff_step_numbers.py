"""`overnight diff --step N` when the run has no kept checkpoint N. The run keeps a workspace
per checkpoint it sees (one look per `poll_seconds` at most), so an agent that wrote two
checkpoints between two looks has one keep for both: its second checkpoint is the run's
first. The refusal said only "no checkpoint 2"; it names the ones the run kept, and how they
are counted."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from overnight.cli.workspace import WorkspaceRefused, chosen
from overnight.core.models import Budget, RunStatus
from overnight.core.workspace_spec import KeptWorkspace, WorkspaceView, kept_numbers, ref_name

NOW = datetime(2026, 12, 7, tzinfo=UTC)


def kept(number: int, outcome: str = "pushed") -> KeptWorkspace:
    pushed = outcome == "pushed"
    return KeptWorkspace(
        number=number,
        outcome=outcome,
        at=NOW,
        ref=ref_name("quick", number) if pushed else None,
        commit=f"{number:040x}" if pushed else None,
    )


def status(*records: KeptWorkspace) -> RunStatus:
    return RunStatus(
        run_id="quick",
        state="finished",
        attempt=1,
        budget=Budget(),
        started_at=NOW,
        workspace=WorkspaceView(base="b" * 40, kept=list(records)),
    )


def test_a_step_the_run_did_not_keep_is_refused_naming_the_steps_it_kept() -> None:
    # Two checkpoints written in quick succession, seen at one look: one keep.
    one = status(kept(1))
    assert chosen(one, 1).number == 1 and chosen(one, None).number == 1
    with pytest.raises(WorkspaceRefused) as refused:
        chosen(one, 2)
    said = str(refused.value)
    assert "no checkpoint 2 (kept: 1;" in said
    assert "written between two of its looks are kept as one" in said


def test_the_kept_numbers_are_said_as_runs_of_consecutive_ones() -> None:
    records = [kept(n) for n in (3, 4, 5, 7)] + [kept(8, "over_limit")]
    assert kept_numbers(records) == "3..5, 7..8"
    assert kept_numbers([kept(1)]) == "1"
    assert kept_numbers([]) == "none yet"
    with pytest.raises(WorkspaceRefused, match=r"no checkpoint 6 \(kept: 3\.\.5, 7\.\.8;"):
        chosen(status(*records), 6)
    with pytest.raises(WorkspaceRefused, match="checkpoint 8's workspace was not kept"):
        chosen(status(*records), 8)
    with pytest.raises(WorkspaceRefused, match="has no kept workspace yet"):
        chosen(status(), None)
