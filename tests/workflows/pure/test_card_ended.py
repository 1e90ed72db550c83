"""A finished run's card is written for the last time when it ends and read long after: it
says when things happened, not how long ago (`last progress 1s ago` forever), and names no
lease, since no sandbox runs on one (issue 51). A live run's card keeps its ages."""

from __future__ import annotations

import pytest

from overnight.core.models import SnapshotRecord
from tests.workflows.pure.test_decide import T0, later, running
from workflows.pure.card import build_status, render_card

ENDED_AT = later(minutes=30, seconds=1)


def ended(state: str) -> str:
    run = running(
        state=state,
        last_progress_at=later(minutes=30),
        lease_ends_at=later(hours=1),
        snapshots=[SnapshotRecord(snapshot_id="snap-1", mode="disk", taken_at=T0, attempt=1)],
        snapshots_taken=1,
    )
    return render_card(build_status(run, ENDED_AT), ENDED_AT)


@pytest.mark.parametrize("state", ["finished", "cancelled", "failed"])
def test_an_ended_runs_card_says_when_things_happened_and_names_no_lease(state: str) -> None:
    card = ended(state)
    assert "- **last progress** 22:30:00 UTC" in card, card
    assert "ago" not in card, card
    assert "lease ends" not in card, card
    assert "`snap-1` (disk) taken 22:00:00 UTC" in card, card


def test_an_ended_runs_status_names_no_lease() -> None:
    run = running(state="finished", lease_ends_at=later(hours=1))
    assert build_status(run, ENDED_AT).lease_ends_at is None


def test_a_live_runs_card_keeps_its_ages_and_its_lease() -> None:
    run = running(last_progress_at=later(minutes=30), lease_ends_at=later(hours=1))
    card = render_card(build_status(run, ENDED_AT), ENDED_AT)
    assert "- **last progress** 1s ago" in card
    assert "- **lease ends** 23:00:00 UTC" in card
