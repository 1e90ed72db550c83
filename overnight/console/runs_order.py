"""The runs list's order and filters, pure: who needs a person first, then what is running,
then what has ended; and which rows a page's filters keep.

A row is anything with the attributes `ListedRun` names (the console's `RunRow`, or the
stand-in the list reads until it lands).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Protocol, TypeVar

# The groups of the list, in the order shown, with their headings.
GROUPS = (
    ("attention", "Needs you"),
    ("waiting", "Waiting for an answer"),
    ("running", "Running"),
    ("ended", "Ended"),
)
OPEN_STATES = (
    "queued",
    "starting",
    "running",
    "restarting",
    "waiting_for_answer",
    "needs_attention",
    "finishing",
)
ENDED_STATES = ("finished", "cancelled", "failed", "terminated", "timed_out")
STATES = OPEN_STATES + ENDED_STATES
# The days a page's address may name (past them `_day` takes none).
FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(9000, 1, 1)


class ListedRun(Protocol):
    @property
    def run_id(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    @property
    def owner(self) -> str: ...
    @property
    def labels(self) -> list[str]: ...
    @property
    def agent(self) -> str: ...
    @property
    def started_at(self) -> datetime: ...
    @property
    def last_progress_at(self) -> datetime | None: ...


R = TypeVar("R", bound=ListedRun)


def group_of(row: ListedRun) -> str:
    if row.closed:
        return "ended"
    if row.state == "needs_attention":
        return "attention"
    if row.state == "waiting_for_answer":
        return "waiting"
    return "running"


def ordered(rows: Iterable[R]) -> list[tuple[str, str, list[R]]]:
    """(group, heading, rows) for each group, in the list's order; the newest start first in
    a group. Empty groups are kept (the page says there is nothing in them)."""
    by_group: dict[str, list[R]] = {name: [] for name, _ in GROUPS}
    for row in rows:
        by_group[group_of(row)].append(row)
    return [
        (name, heading, sorted(by_group[name], key=lambda r: r.started_at, reverse=True))
        for name, heading in GROUPS
    ]


@dataclass(frozen=True)
class RunFilters:
    """The list's filters, as the page's GET parameters give them ('' = any)."""

    state: str = ""
    owner: str = ""
    label: str = ""
    agent: str = ""
    # Runs started on or after `since` and before the end of `until` (UTC days).
    since: date | None = None
    until: date | None = None

    @classmethod
    def from_query(cls, params: Mapping[str, str]) -> RunFilters:
        state = params.get("state", "").strip()
        return cls(
            state=state if state in STATES or state in dict(GROUPS) else "",
            owner=params.get("owner", "").strip()[:200],
            label=params.get("label", "").strip()[:200],
            agent=params.get("agent", "").strip()[:100],
            since=_day(params.get("since", "")),
            until=_day(params.get("until", "")),
        )

    def keeps(self, row: ListedRun) -> bool:
        if self.state and self.state not in (row.state, group_of(row)):
            return False
        if self.owner and row.owner != self.owner:
            return False
        if self.label and self.label not in row.labels:
            return False
        if self.agent and row.agent != self.agent:
            return False
        if self.since and row.started_at < _start_of(self.since):
            return False
        return not (self.until and row.started_at >= _start_of(self.until + timedelta(days=1)))

    def query(self) -> dict[str, str]:
        """The non-empty filters as GET parameters (for links and the SSE url)."""
        found = {
            "state": self.state,
            "owner": self.owner,
            "label": self.label,
            "agent": self.agent,
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
        }
        return {key: value for key, value in found.items() if value}


def _day(text: str) -> date | None:
    """The day `text` names, or None (none given, not a day, or so far off that a day's
    arithmetic would pass the calendar's ends: no filter, as for none)."""
    try:
        day = date.fromisoformat(text.strip())
    except ValueError:
        return None
    return day if FIRST_DAY <= day <= LAST_DAY else None


def _start_of(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)
