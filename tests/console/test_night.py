"""The night's sums (overnight/console/night.py), pure: `overnight report`'s totals from the
rows, spend by day and owner, hours held for people, the range asked for and the CSV."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime, timedelta

from overnight.cli.report_totals import summarize
from overnight.console.night import csv_rows, facts_of, night_of, night_range
from overnight.console.rows import RunRow

NOW = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)


def row(run_id: str, hours_ago: float, **fields: object) -> RunRow:
    values: dict[str, object] = {
        "state": "running",
        "closed": False,
        "has_row": True,
        **fields,
    }
    return RunRow(run_id=run_id, started_at=NOW - timedelta(hours=hours_ago), **values)  # type: ignore[arg-type]


ROWS = [
    row(
        "finished-one",
        10,
        state="finished",
        closed=True,
        closed_at=NOW - timedelta(hours=1),
        owner="web",
        spend_usd=1.5,
        model_usd=1.0,
        restarts=2,
        restarts_by_cause={"stalled": 1, "crashed": 1},
        safety_net_usd=0.1,
        wait_hours=0.5,
        attention_hours=1.0,
    ),
    row("asks", 30, state="waiting_for_answer", owner="data", spend_usd=0.25, wait_hours=3),
    row(
        "out-of-budget",
        5,
        state="failed",
        closed=True,
        closed_at=NOW - timedelta(hours=2),
        last_state="needs_attention",
        owner="web",
        spend_usd=2.0,
        restarts=5,
        restarts_by_cause={"crashed": 5},
        safety_net_usd=0.5,
        attention_hours=4,
    ),
    row("before-rows", 3, state="finished", closed=True, closed_at=NOW, has_row=False),
    row("ended-long-ago", 200, state="finished", closed=True, closed_at=NOW - timedelta(days=5)),
]


def test_the_totals_are_the_reports_own_sums_of_the_runs_in_the_range() -> None:
    span = night_range({"span": "2d"}, NOW)
    night = night_of(ROWS, span)

    kept = [r for r in ROWS if r.run_id != "ended-long-ago"]
    assert night.totals == summarize([facts_of(r) for r in kept], span.since, span.until)
    assert night.totals.by_outcome == {
        "finished": 2,
        "out_of_budget": 1,
        "waiting_for_answer": 1,
    }
    assert night.totals.restarts_by_cause == {"crashed": 6, "stalled": 1}
    assert night.totals.safety_net_usd == 0.6
    assert night.totals.model_usd == 1.0
    assert night.totals.sandbox_usd == 0.5 + 0.25 + 2.0
    # A run begun before rows counts in its outcome; its money is unknown, not 0.
    assert (night.runs_with_row, night.totals.runs_with_spend) == (3, 3)


def test_spend_is_by_the_day_each_run_started_and_by_owner() -> None:
    night = night_of(ROWS, night_range({"span": "2d"}, NOW))

    assert night.spend_by_owner == {"web": 3.5, "data": 0.25}
    assert night.owners == ["web", "data"]
    assert night.spend_by_day[date(2026, 12, 5)] == {"data": 0.25, "web": 1.5}
    assert night.spend_by_day[date(2026, 12, 6)] == {"web": 2.0}
    assert night.people_hours == 0.5 + 1.0 + 3 + 4
    assert night.attention_by_day[date(2026, 12, 6)] == 4


def test_the_range_is_days_or_a_span_and_defaults_to_the_last_24_hours() -> None:
    days = night_range({"since": "2026-12-01", "until": "2026-12-03"}, NOW)
    assert (days.since, days.until) == (
        datetime(2026, 12, 1, tzinfo=UTC),
        datetime(2026, 12, 4, tzinfo=UTC),
    )
    assert days.days == [date(2026, 12, 1), date(2026, 12, 2), date(2026, 12, 3)]
    assert night_range({}, NOW).since == NOW - timedelta(hours=24)
    assert night_range({"span": "7d"}, NOW).since == NOW - timedelta(days=7)
    # Nonsense falls back to the default rather than failing the page.
    assert night_range({"span": "soon"}, NOW).since == NOW - timedelta(hours=24)
    backwards = night_range({"since": "2026-12-05", "until": "2026-12-01"}, NOW)
    assert backwards.since < backwards.until


def test_the_csv_has_a_line_a_run_and_no_cell_a_spreadsheet_would_run() -> None:
    hostile = row("formula", 1, owner='=HYPERLINK("http://x")', spend_usd=0.5)
    night = night_of([*ROWS, hostile], night_range({"span": "2d"}, NOW))

    out = io.StringIO()
    csv.writer(out).writerows(csv_rows(night))
    table = list(csv.reader(io.StringIO(out.getvalue())))
    header, body = table[0], table[1:]
    assert header[:3] == ["run_id", "owner", "agent"]
    assert [line[0] for line in body] == [
        "asks",
        "finished-one",
        "out-of-budget",
        "before-rows",
        "formula",
    ]
    by_id = {line[0]: dict(zip(header, line, strict=True)) for line in body}
    assert by_id["formula"]["owner"].startswith("'=")
    assert by_id["out-of-budget"]["outcome"] == "out_of_budget"
    assert by_id["finished-one"]["restarts_by_cause"] == "crashed:1;stalled:1"
    assert by_id["before-rows"]["spend_usd"] == "" and by_id["before-rows"]["figures_known"] == "no"
