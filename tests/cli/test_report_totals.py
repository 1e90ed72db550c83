"""`overnight report`'s sums, pure: results of any version count as far as they go."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from overnight.cli.report_totals import RunFacts, facts_from_result, parse_since, summarize

T0 = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("7d", timedelta(days=7)),
        ("36h", timedelta(hours=36)),
        ("90m", timedelta(minutes=90)),
        ("2w", timedelta(weeks=2)),
        (" 1.5d ", timedelta(hours=36)),
    ],
)
def test_since(text: str, span: timedelta) -> None:
    assert parse_since(text) == span


@pytest.mark.parametrize("text", ["7", "d", "7 days", "-1d", "0d", "7y", ""])
def test_a_bad_since_says_what_to_give(text: str) -> None:
    with pytest.raises(ValueError, match="--since"):
        parse_since(text)


def test_a_result_of_today_counts_whole() -> None:
    result = {
        "run_id": "a",
        "outcome": "finished",
        "attempts": 3,
        "restarts": 2,
        "spend_usd": 0.5,
        "safety_net": {
            "restarts": 2,
            "usd": 0.1,
            "sandbox_usd": 0.4,
            "by_cause": {"crashed": 1, "stalled": 1},
        },
        "spend_model_usd": 0.1,
    }
    facts = facts_from_result("a", result)
    assert (facts.outcome, facts.restarts, facts.sandbox_usd, facts.model_usd) == (
        "finished",
        2,
        0.4,
        0.1,
    )
    assert facts.by_cause == {"crashed": 1, "stalled": 1} and facts.safety_net_usd == 0.1


def test_an_older_result_has_no_safety_net_and_a_status_counts_its_restarts() -> None:
    old = facts_from_result("b", {"outcome": "cancelled", "restarts": 1, "spend_usd": 0.2})
    assert (old.safety_net_usd, old.sandbox_usd, old.by_cause) == (None, 0.2, {})
    status = facts_from_result(
        "c",
        {
            "state": "running",
            "restarts": [{}],
            "restarts_used": 1,
            "spend_model_usd": 2.5,
            "spend_usd": 3.0,
        },
    )
    assert (status.restarts, status.model_usd, status.sandbox_usd) == (1, 2.5, 0.5)
    junk = facts_from_result("d", {"restarts": "many", "spend_usd": "NaN", "safety_net": 3})
    assert (junk.restarts, junk.sandbox_usd, junk.safety_net_usd) == (None, None, None)


def test_the_sums_by_hand() -> None:
    runs = [
        RunFacts("a", "finished", 2, {"crashed": 2}, sandbox_usd=0.40, safety_net_usd=0.10),
        RunFacts(
            "b", "finished", 1, {"stalled": 1}, sandbox_usd=0.60, model_usd=1.5, safety_net_usd=0.05
        ),
        RunFacts("c", "out_of_budget", 3, unread=True),  # restarts from visibility alone
        RunFacts("d", "cancelled", 0, sandbox_usd=0.25),
    ]
    report = summarize(runs, T0 - timedelta(days=7), T0)
    assert report.runs == 4
    assert report.by_outcome == {"cancelled": 1, "finished": 2, "out_of_budget": 1}
    assert report.restarts == 6
    assert report.restarts_by_cause == {"crashed": 2, "stalled": 1, "unread": 3}
    assert report.sandbox_usd == pytest.approx(1.25)
    assert report.model_usd == pytest.approx(1.5)
    assert report.safety_net_usd == pytest.approx(0.15)
    # Of the runs with both figures: 0.15 / 1.00.
    assert report.safety_net_share == pytest.approx(0.15)
    assert (report.runs_with_spend, report.runs_with_model_spend, report.runs_with_safety_net) == (
        3,
        1,
        2,
    )
    empty = summarize([], T0, T0)
    assert empty.runs == 0 and empty.safety_net_share is None
