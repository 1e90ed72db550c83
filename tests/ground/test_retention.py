"""The rule `overnight reap` applies to each sandbox (overnight.core.retention.verdict), and the
keep-until label every provider takes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from overnight.core.constants import LABEL_KEEP_UNTIL
from overnight.core.retention import RunEnd, keep_until, label_value, parse_label, verdict

NOW = datetime(2026, 12, 4, 3, 15, tzinfo=UTC)
OPEN = RunEnd(open=True)
CLEAN = RunEnd(clean=True, closed_at=NOW - timedelta(days=1))
GONE = RunEnd(known=False)


def kept(until: datetime) -> dict[str, str]:
    return {LABEL_KEEP_UNTIL: label_value(until)}


def unclean(closed_days_ago: float, keep_days: int | None = 3) -> RunEnd:
    return RunEnd(closed_at=NOW - timedelta(days=closed_days_ago), keep_failed_days=keep_days)


def test_the_keep_until_label_is_letters_and_digits_and_reads_back_to_the_second() -> None:
    when = datetime(2026, 12, 4, 3, 15, 42, 999_000, tzinfo=UTC)
    value = label_value(when)
    assert value == "20261204T031542Z" and value.isalnum()
    assert parse_label(value) == when.replace(microsecond=0)
    assert keep_until(NOW, 3) == NOW + timedelta(days=3)
    for bad in (None, "", "soon", "2026-12-04T03:15:42Z", "20261304T031542Z"):
        assert parse_label(bad) is None


@pytest.mark.parametrize(
    ("state", "labels", "run", "deleted"),
    [
        # Past its retention: deleted whatever its run.
        ("paused", kept(NOW - timedelta(seconds=1)), CLEAN, True),
        ("paused", kept(NOW), GONE, True),
        # Inside it: kept, even with the run gone from Temporal.
        ("paused", kept(NOW + timedelta(seconds=1)), CLEAN, False),
        ("paused", kept(NOW + timedelta(days=2)), GONE, False),
        # An open run's sandboxes are its own business.
        ("running", {}, OPEN, False),
        ("paused", {}, OPEN, False),
        # Nobody supervises a running sandbox of a closed run.
        ("running", {}, CLEAN, True),
        ("starting", {}, unclean(0), True),
        ("running", kept(NOW + timedelta(days=1)), GONE, True),
        # Unlabelled and paused by a run that ended well: kept on purpose (keep_sandboxes).
        ("paused", {}, CLEAN, False),
        # A run that could not clean up: its spec's retention from its close, as it would have.
        ("paused", {}, unclean(2.9), False),
        ("paused", {}, unclean(3.1), True),
        ("paused", {}, unclean(0.5, keep_days=0), True),
        ("paused", {}, unclean(10, keep_days=None), False),  # no spec to read: kept
        ("paused", {}, GONE, True),
        # Already stopped (a local tombstone): nothing to do.
        ("stopped", {}, CLEAN, False),
    ],
)
def test_reap_deletes_what_is_past_retention_or_belongs_to_no_open_run(
    state: str, labels: dict[str, str], run: RunEnd, deleted: bool
) -> None:
    judged = verdict(state, labels, run, now=NOW)
    assert judged.delete is deleted, judged.why
    assert judged.why


def test_reap_paused_deletes_every_paused_sandbox_of_a_closed_run_but_none_of_an_open_one() -> None:
    later = kept(NOW + timedelta(days=2))
    for run in (CLEAN, GONE, unclean(1)):
        assert verdict("paused", later, run, now=NOW, include_paused=True).delete
        assert verdict("paused", {}, run, now=NOW, include_paused=True).delete
    assert not verdict("paused", {}, OPEN, now=NOW, include_paused=True).delete


def test_the_reason_says_when_the_retention_ends_or_ended() -> None:
    until = datetime(2026, 12, 7, 3, 15, tzinfo=UTC)
    assert verdict("paused", kept(until), CLEAN, now=NOW).why == (
        "kept for a look until 2026-12-07 03:15 UTC"
    )
    after = verdict("paused", kept(until), CLEAN, now=until + timedelta(hours=1))
    assert after.why == "its retention ended 2026-12-07 03:15 UTC"


def test_the_days_a_provider_keeps_a_paused_sandbox_never_end_before_its_label() -> None:
    from overnight.core.retention import provider_days

    now = datetime(2026, 12, 1, 8, tzinfo=UTC)
    # Made 6 h ago, kept 3 days from now: 3 days 6 h from its making, so 4 whole days.
    assert provider_days(now + timedelta(days=3), now - timedelta(hours=6), now) == 4
    assert provider_days(now + timedelta(days=3), now - timedelta(days=3), now) == 6
    # No creation time: counted from now. At least 1, at most 365 (reap deletes it then).
    assert provider_days(now + timedelta(days=2), None, now) == 2
    assert provider_days(now, None, now) == 1
    assert provider_days(now + timedelta(days=400), None, now) == 365
    # A creation time in the future (clock skew) counts as now.
    assert provider_days(now + timedelta(days=2), now + timedelta(hours=5), now) == 2
