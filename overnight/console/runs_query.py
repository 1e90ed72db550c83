"""The runs list's filters as a visibility query, where the namespace can answer them. Pure.

Owner, label and agent kind are search attributes of runs begun with the row marker
(`OvernightOwner`, `OvernightLabels`, `OvernightAgent`), the start date is Temporal's own
`StartTime`: those go into the query, so the server narrows the list. A filter goes into the
query only when the namespace has registered its attribute (a query naming an unknown one is
refused whole) and its value is plain (letters, digits, `._:/@+-` and spaces: nothing to
escape); any other filter is applied to the rows instead (`RunFilters.keeps`), which is
always done as well, so the result is the same either way.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import UTC, date, datetime, time, timedelta
from typing import Protocol

from overnight.core.constants import SA_AGENT, SA_LABELS, SA_OWNER, WORKFLOW_TYPE

_PLAIN = re.compile(r"^[A-Za-z0-9 ._:/@+-]{1,200}$")
RUNS = f"WorkflowType = '{WORKFLOW_TYPE}'"


class Filters(Protocol):
    """What the runs page's filters (`overnight.console.runs_order.RunFilters`) hold."""

    @property
    def owner(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def agent(self) -> str: ...
    @property
    def since(self) -> date | None: ...
    @property
    def until(self) -> date | None: ...


def runs_query(filters: Filters | None, present: Collection[str], where: str = "") -> str:
    """The visibility query of AgentRun executions these filters keep (see the docstring)."""
    parts = [RUNS]
    if where:
        parts.append(f"({where})")
    if filters is None:
        return " AND ".join(parts)
    for name, value in ((SA_OWNER, filters.owner), (SA_AGENT, filters.agent)):
        if value and name in present and _PLAIN.match(value):
            parts.append(f"{name} = '{value}'")
    if filters.label and SA_LABELS in present and _PLAIN.match(filters.label):
        parts.append(f"{SA_LABELS} = '{filters.label}'")
    if filters.since is not None:
        parts.append(f"StartTime >= '{day_start(filters.since).isoformat()}'")
    if filters.until is not None:
        parts.append(f"StartTime < '{day_start(filters.until + timedelta(days=1)).isoformat()}'")
    return " AND ".join(parts)


def open_runs(where: str = "") -> str:
    return runs_query(None, (), where) + " AND ExecutionStatus = 'Running'"


def closed_runs_since(since: datetime, where: str = "") -> str:
    return (
        runs_query(None, (), where)
        + f" AND ExecutionStatus != 'Running' AND CloseTime >= '{since.isoformat()}'"
    )


def day_start(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)
