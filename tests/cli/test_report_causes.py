"""`overnight report` names every restart cause it counts (issue 51: a cause "unknown" that
nothing explained). A restart whose own cause the report cannot read is counted under why it
cannot: its run's status was never answered (`unread`), its run is older than the causes
(`not_kept`), or its new sandbox never ran (`not_restarted`); a run's status names the
restarts the safety net has not counted yet by their own reasons. The text says what each of
these means."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from overnight.cli.report import report_text
from overnight.cli.report_totals import EXPLAINED_CAUSES, RunFacts, facts_from_result, summarize

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
KNOWN_CAUSES = {
    "crashed",
    "looped",
    "stalled",
    "sandbox_failed",
    "time_limit",
    "fresh_starts_used_up",
    "resumed",
    "other",
}


def test_restarts_without_a_cause_of_their_own_are_counted_under_why_and_explained() -> None:
    runs = [
        RunFacts("a", "finished", 2, {"crashed": 2}, sandbox_usd=0.4, safety_net_usd=0.1),
        RunFacts("b", "out_of_budget", 3, unread=True),  # no worker answered its status
        RunFacts("c", "finished", 1, sandbox_usd=0.1),  # begun before causes were kept
        # Cancelled while restarting: the restart noticed, its new sandbox never ran.
        RunFacts("d", "cancelled", 2, {"crashed": 1}, sandbox_usd=0.1, safety_net_usd=0.01),
    ]
    report = summarize(runs, T0 - timedelta(days=7), T0)
    assert report.restarts_by_cause == {
        "crashed": 3,
        "not_kept": 1,
        "not_restarted": 1,
        "unread": 3,
    }
    assert set(report.restarts_by_cause) <= KNOWN_CAUSES | set(EXPLAINED_CAUSES)
    text = report_text(report)
    assert "unknown" not in text
    assert "restarts:     8 (3 crashed, 1 not kept, 1 not restarted, 3 unread)" in text
    for name in ("unread", "not_kept", "not_restarted"):
        assert f"{name.replace('_', ' ')}: {EXPLAINED_CAUSES[name]}" in text
    assert "other:" not in text  # only the causes it counts are explained


def test_the_catch_all_cause_other_is_explained_when_counted() -> None:
    runs = [RunFacts("f", "finished", 1, {"other": 1}, sandbox_usd=0.1, safety_net_usd=0.01)]
    text = report_text(summarize(runs, T0 - timedelta(days=1), T0))
    assert "restarts:     1 (1 other)" in text
    assert "other: a reason none of the named causes covers" in text


def test_a_status_names_its_restarts_not_yet_counted_by_their_reasons() -> None:
    status = {
        "state": "restarting",
        "restarts_used": 2,
        "restarts": [
            {"attempt": 1, "reason": "agent crashed (exit 1)"},
            {"attempt": 2, "reason": "agent stalled: no checkpoint for 900s"},
        ],
        "safety_net": {"by_cause": {"crashed": 1}, "usd": 0.01},
        "spend_usd": 0.1,
    }
    facts = facts_from_result("e", status)
    assert facts.by_cause == {"crashed": 1, "stalled": 1}
    report = summarize([facts], T0 - timedelta(days=1), T0)
    assert report.restarts_by_cause == {"crashed": 1, "stalled": 1}
