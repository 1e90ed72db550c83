"""The runs list's filters as a visibility query (overnight/console/runs_query.py), pure: what
the namespace can answer goes into the query, nothing that would need escaping does."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from overnight.console.runs_query import runs_query
from overnight.core.constants import SA_AGENT, SA_LABELS, SA_OWNER, SEARCH_ATTRIBUTE_TYPES

ALL = list(SEARCH_ATTRIBUTE_TYPES)


@dataclass(frozen=True)
class Filters:
    owner: str = ""
    label: str = ""
    agent: str = ""
    since: date | None = None
    until: date | None = None


def test_plain_filters_and_days_go_into_the_query() -> None:
    query = runs_query(
        Filters(
            owner="team-web",
            label="nightly",
            agent="codex",
            since=date(2026, 12, 1),
            until=date(2026, 12, 2),
        ),
        ALL,
    )
    assert query == (
        "WorkflowType = 'AgentRun' AND OvernightOwner = 'team-web' AND "
        "OvernightAgent = 'codex' AND OvernightLabels = 'nightly' AND "
        "StartTime >= '2026-12-01T00:00:00+00:00' AND StartTime < '2026-12-03T00:00:00+00:00'"
    )


def test_a_value_with_a_quote_or_an_attribute_the_namespace_lacks_stays_out() -> None:
    hostile = Filters(owner="x' OR WorkflowType != 'y", label="it's", agent="codex")
    query = runs_query(hostile, ALL)
    assert "OR" not in query and SA_OWNER not in query and SA_LABELS not in query
    assert runs_query(Filters(owner="web", agent="codex"), [n for n in ALL if n != SA_OWNER]) == (
        f"WorkflowType = 'AgentRun' AND {SA_AGENT} = 'codex'"
    )
    assert runs_query(None, ALL, "TaskQueue = 'nightly'") == (
        "WorkflowType = 'AgentRun' AND (TaskQueue = 'nightly')"
    )
