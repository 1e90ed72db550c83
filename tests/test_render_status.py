"""What `overnight status` prints about a sandbox's lease."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from overnight.models import Budget, RunStatus
from overnight.render import status_text

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
