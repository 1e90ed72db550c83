"""The runs list (`/`) and its live updates (`/runs/events`).

Who needs a person comes first (out of budget, then a question waiting), then what is
running, then what has ended (overnight.console.runs_order); filters are GET parameters.
Each row: the next step, attempts, spend against budget, hours, last progress, the PR.

Every browser reads the one shared `RunsSource` (overnight/console/runs_source.py): a page is
drawn from its latest snapshot, and each open page's event stream waits on its change feed,
so Temporal is asked once a poll however many pages are open. A page for days older than
the snapshot holds is one visibility query with the filters in it (`search`). The events
replace a changed row in place, or move it when its group changed; a stream that starts
behind the page's snapshot redraws the groups whole.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from overnight.console import events
from overnight.console.auth import viewer
from overnight.console.context import console_of
from overnight.console.limits import ReadersStream
from overnight.console.render import fragment, page
from overnight.console.rows import RunRow
from overnight.console.runs_order import GROUPS, STATES, RunFilters, group_of, ordered
from overnight.console.runs_source import RunsSource

# How long a page waits for the console's first look at the runs (it has just started).
FIRST_POLL_SECONDS = 15.0


async def rows_for(runs: RunsSource, filters: RunFilters) -> list[RunRow]:
    """The rows the filters keep: from the snapshot, or (for days before it) one query."""
    if filters.since is not None:
        oldest = (datetime.now(UTC) - timedelta(days=runs.closed_days)).date()
        if filters.since < oldest:
            return await runs.search(filters)
    try:
        await runs.ready(FIRST_POLL_SECONDS)
    except TimeoutError:
        pass  # the page says the list is not read yet (runs.error), and the stream fills it
    return runs.rows(filters)


async def runs_list(request: Request) -> Response:
    await viewer(request)
    runs = _runs(request)
    filters = RunFilters.from_query(request.query_params)
    version = runs.version
    rows = await rows_for(runs, filters)
    query = filters.query()
    context = {
        "groups": ordered(rows),
        "group_names": GROUPS,
        "states": STATES,
        "filters": filters,
        "query": urlencode(query),
        "events_url": "/runs/events?" + urlencode({**query, "v": str(version)}),
        "choices": filter_choices(runs.rows()),
        "total": len(rows),
        "now": datetime.now(UTC),
        "error": runs.error,
    }
    return page(request, "runs.html", context)


def filter_choices(rows: Sequence[RunRow]) -> list[tuple[str, list[str]]]:
    """What the owner, label and agent fields suggest: the values the runs have."""
    owners = sorted({row.owner for row in rows if row.owner})
    labels = sorted({label for row in rows for label in row.labels})
    agents = sorted({row.agent for row in rows if row.agent})
    return [("owners", owners[:200]), ("labels", labels[:200]), ("agents", agents[:50])]


async def runs_events(request: Request) -> Response:
    seen = await viewer(request)
    filters = RunFilters.from_query(request.query_params)
    try:
        drawn = int(request.query_params.get("v", "-1"))
    except ValueError:
        drawn = -1
    context = console_of(request)
    stream = events.stream(_changes(_runs(request), filters, drawn), context.stopping)
    return ReadersStream(stream, context.streams, seen.session_id)


async def _changes(runs: RunsSource, filters: RunFilters, drawn: int) -> AsyncIterator[str]:
    feed = runs.changes()
    # Listening before looking: nothing that changes from here on is missed.
    following = asyncio.ensure_future(anext(feed))
    try:
        await asyncio.sleep(0)
        shown = {row.run_id: group_of(row) for row in runs.rows(filters)}
        if runs.version != drawn:  # changed between the page and this stream: redraw it
            for item in redraw(runs.rows(filters), datetime.now(UTC)):
                yield item
        while True:
            change = await following
            following = asyncio.ensure_future(anext(feed))
            now = datetime.now(UTC)
            for item in row_events(runs, filters, change.changed, change.removed, shown, now):
                yield item
    finally:
        following.cancel()  # the feed ends inside the task that reads it


def redraw(rows: Sequence[RunRow], now: datetime) -> list[str]:
    """Every group's rows and count, drawn whole."""
    news = []
    for group, _, its_rows in ordered(rows):
        html = fragment("_group_rows.html", {"group": group, "rows": its_rows, "now": now})
        news.append(events.replace(f"rows-{group}", html))
        count = fragment("_group_count.html", {"group": group, "count": len(its_rows)})
        news.append(events.replace(f"count-{group}", count))
    return news


def row_events(
    runs: Any,
    filters: RunFilters,
    changed: frozenset[str],
    removed: frozenset[str],
    shown: dict[str, str],
    now: datetime,
) -> list[str]:
    """The events that bring a page showing `shown` (run id -> group) up to `changed` and
    `removed` rows; `shown` is updated. `runs` is anything with `row(id)` and `rows(filters)`."""
    news: list[str] = []
    for run_id in sorted(changed):
        row = runs.row(run_id)
        element = f"run-{run_id}"
        if row is None or not filters.keeps(row):
            if shown.pop(run_id, None) is not None:
                news.append(events.remove(element))
            continue
        group = group_of(row)
        before = shown.get(run_id)
        if before is not None and before != group:
            news.append(events.remove(element))
        html = fragment("_run_row.html", {"row": row, "group": group, "now": now})
        news.append(events.replace(element, html, parent=f"rows-{group}", where="start"))
        shown[run_id] = group
    for run_id in sorted(removed):
        if shown.pop(run_id, None) is not None:
            news.append(events.remove(f"run-{run_id}"))
    if news:
        counts = {name: 0 for name, _ in GROUPS}
        for group in shown.values():
            counts[group] += 1
        for name, count in counts.items():
            html = fragment("_group_count.html", {"group": name, "count": count})
            news.append(events.replace(f"count-{name}", html))
    return news


def _runs(request: Request) -> RunsSource:
    runs = console_of(request).runs
    assert runs is not None, "the console's context has no runs source"
    return runs


routes: list[BaseRoute] = [
    Route("/", runs_list, methods=["GET"]),
    Route("/runs/events", runs_events, methods=["GET"]),
]
