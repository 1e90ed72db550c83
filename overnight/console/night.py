"""The night, pure: what the runs of a range came to, for the console's `/night` and its CSV.

Runs by outcome, restarts by cause, spend and what the safety net cost are `overnight
report`'s sums (overnight/cli/report_totals.py: each row becomes the report's `RunFacts` and
the report's `summarize` adds them up), so the page and the command never disagree. The
night adds what a page of charts wants besides: spend by day and owner, and the hours runs
spent held for people (out of budget waiting for an extension, and paused for the agent's
questions and waits), by day.

The runs of a range are those that closed in it or are still going, and started before its
end (the report's rule); each counts whole on the day (UTC) it started. A run begun before
the row memo counts in its outcome and restarts, its money unknown (the figures say of how
many runs they are).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from overnight.cli.report_totals import Report, RunFacts, parse_since, summarize
from overnight.console.rows import RunRow

NO_OWNER = "(no owner)"
DEFAULT_SPAN = timedelta(days=1)
MOST_DAYS = 92  # a range longer than this is cut to its last days (a page, not an archive)
# The days a page's address may name (past them `_day` takes none).
FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(9000, 1, 1)


@dataclass(frozen=True)
class NightRange:
    since: datetime
    until: datetime

    @property
    def days(self) -> list[date]:
        first, last = self.since.date(), (self.until - timedelta(microseconds=1)).date()
        return [first + timedelta(days=n) for n in range((last - first).days + 1)]


@dataclass
class Night:
    range: NightRange
    totals: Report
    runs_with_row: int = 0
    # day -> owner -> USD (sandboxes and model), and owner -> USD over the range.
    spend_by_day: dict[date, dict[str, float]] = field(default_factory=dict)
    spend_by_owner: dict[str, float] = field(default_factory=dict)
    # day -> hours held for people: out of budget waiting (attention), paused for questions
    # and waits (wait).
    attention_by_day: dict[date, float] = field(default_factory=dict)
    wait_by_day: dict[date, float] = field(default_factory=dict)
    rows: list[RunRow] = field(default_factory=list)

    @property
    def owners(self) -> list[str]:
        """Owners, the most spending first."""
        return sorted(self.spend_by_owner, key=lambda owner: (-self.spend_by_owner[owner], owner))

    @property
    def people_hours(self) -> float:
        return sum(self.attention_by_day.values()) + sum(self.wait_by_day.values())


def night_range(params: Mapping[str, str], now: datetime) -> NightRange:
    """The range a page asks for: `since` and `until` as UTC days (inclusive), or `span`
    (`7d`, `36h`, as `overnight report --since` takes); the last 24 hours otherwise."""
    since_day, until_day = _day(params.get("since", "")), _day(params.get("until", ""))
    if since_day or until_day:
        until = _start(until_day + timedelta(days=1)) if until_day else now
        since = _start(since_day) if since_day else until - DEFAULT_SPAN
    else:
        until = now
        try:
            # (A span longer than the calendar overflows its subtraction.)
            since = now - parse_since(params.get("span", "") or "24h")
        except (ValueError, OverflowError):
            since = now - DEFAULT_SPAN
    if since >= until:
        since = until - DEFAULT_SPAN
    return NightRange(max(since, until - timedelta(days=MOST_DAYS)), until)


def outcome_of(row: RunRow) -> str:
    """The report's outcome names: finished, cancelled, out_of_budget, failed, ... and an
    open run's state (running, needs_attention, waiting_for_answer, ...)."""
    if row.state == "failed" and row.last_state == "needs_attention" and not row.failure:
        # It failed while it needed a person: out of budget, nobody extended it.
        return "out_of_budget"
    return row.state


def facts_of(row: RunRow) -> RunFacts:
    """A row as `overnight report` counts a run (None where the row does not know)."""
    known = row.has_row
    return RunFacts(
        run_id=row.run_id,
        outcome=outcome_of(row),
        restarts=row.restarts,
        by_cause=dict(row.restarts_by_cause),
        sandbox_usd=max(0.0, row.spend_usd - row.model_usd) if known else None,
        model_usd=row.model_usd if known else None,
        safety_net_usd=row.safety_net_usd,
    )


def in_range(row: RunRow, span: NightRange) -> bool:
    """Closed in the range or still going, and started before its end."""
    if row.started_at >= span.until:
        return False
    return row.closed_at is None or row.closed_at >= span.since


def night_of(rows: Iterable[RunRow], span: NightRange) -> Night:
    kept = sorted((row for row in rows if in_range(row, span)), key=lambda row: row.started_at)
    night = Night(span, summarize([facts_of(row) for row in kept], span.since, span.until))
    night.rows = kept
    for day in span.days:
        night.spend_by_day[day] = {}
        night.attention_by_day[day] = 0.0
        night.wait_by_day[day] = 0.0
    for row in kept:
        if not row.has_row:
            continue
        night.runs_with_row += 1
        day = max(row.started_at.astimezone(UTC).date(), span.days[0])
        owner = row.owner or NO_OWNER
        by_owner = night.spend_by_day.setdefault(day, {})
        by_owner[owner] = by_owner.get(owner, 0.0) + row.spend_usd
        night.spend_by_owner[owner] = night.spend_by_owner.get(owner, 0.0) + row.spend_usd
        night.attention_by_day[day] = night.attention_by_day.get(day, 0.0) + row.attention_hours
        night.wait_by_day[day] = night.wait_by_day.get(day, 0.0) + row.wait_hours
    return night


CSV_COLUMNS = (
    "run_id",
    "owner",
    "agent",
    "labels",
    "started_at",
    "closed_at",
    "outcome",
    "restarts",
    "restarts_by_cause",
    "spend_usd",
    "sandbox_usd",
    "model_usd",
    "safety_net_usd",
    "attention_hours",
    "wait_hours",
    "figures_known",
)


def csv_rows(night: Night) -> list[list[str]]:
    """The night's runs, one line each: what every chart of the page adds up. A cell that a
    spreadsheet would take for a formula (`=`, `+`, `-`, `@` first) starts with `'`."""
    lines = [list(CSV_COLUMNS)]
    for row in night.rows:
        facts = facts_of(row)
        known = row.has_row
        causes = ";".join(f"{cause}:{n}" for cause, n in sorted(row.restarts_by_cause.items()))
        lines.append(
            [
                _cell(row.run_id),
                _cell(row.owner),
                _cell(row.agent),
                _cell(" ".join(row.labels)),
                row.started_at.isoformat(),
                row.closed_at.isoformat() if row.closed_at else "",
                _cell(facts.outcome),
                str(row.restarts),
                _cell(causes),
                _money(row.spend_usd if known else None),
                _money(facts.sandbox_usd),
                _money(facts.model_usd),
                _money(row.safety_net_usd),
                f"{row.attention_hours:.3f}" if known else "",
                f"{row.wait_hours:.3f}" if known else "",
                "yes" if known else "no",
            ]
        )
    return lines


def _cell(text: str) -> str:
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _money(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def _day(text: str) -> date | None:
    """The day `text` names, or None (none given, not a day, or so far off that a day's
    arithmetic would pass the calendar's ends: no filter, as for none)."""
    try:
        day = date.fromisoformat(text.strip())
    except ValueError:
        return None
    return day if FIRST_DAY <= day <= LAST_DAY else None


def _start(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)
