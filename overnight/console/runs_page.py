"""The runs list (`/`) and its live updates (`/runs/events`).

Who needs a person comes first (out of budget, then a question waiting), then what is
running, then what has ended (overnight.console.runs_order); filters are GET parameters.
Each row: the next step, attempts, spend against budget, hours, last progress, the PR.
The events replace a row in place when it changes (or move it when its group changes).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from overnight.console import events
from overnight.console.auth import viewer
from overnight.console.context import ConsoleContext, console_of
from overnight.console.render import fragment, page
from overnight.console.runs_order import GROUPS, STATES, RunFilters, group_of, ordered
from overnight.console.runs_stopgap import read_rows

# How often a browser's stream looks for news (the stand-in reads Temporal each time).
POLL_SECONDS = 2.0
# A comment this often keeps proxies from closing a quiet stream.
KEEP_ALIVE_SECONDS = 15.0


async def rows_of(context: ConsoleContext, filters: RunFilters) -> list[Any]:
    rows = await read_rows(context.client)
    return [row for row in rows if filters.keeps(row)]


async def runs_list(request: Request) -> Response:
    await viewer(request)
    filters = RunFilters.from_query(request.query_params)
    rows = await rows_of(console_of(request), filters)
    context = {
        "groups": ordered(rows),
        "group_names": GROUPS,
        "states": STATES,
        "filters": filters,
        "query": urlencode(filters.query()),
        "total": len(rows),
        "now": datetime.now(UTC),
    }
    return page(request, "runs.html", context)


async def runs_events(request: Request) -> Response:
    await viewer(request)
    filters = RunFilters.from_query(request.query_params)
    context = console_of(request)
    return events.stream(_changes(request, context, filters))


async def _changes(
    request: Request, context: ConsoleContext, filters: RunFilters
) -> AsyncIterator[str]:
    shown: dict[str, tuple[str, str]] = {}  # run id -> (group, the row's html)
    first = True
    quiet = 0.0
    while not await request.is_disconnected():
        rows = await rows_of(context, filters)
        news = list(row_events(rows, shown, datetime.now(UTC), first=first))
        first = False
        if news:
            quiet = 0.0
            for item in news:
                yield item
        elif quiet >= KEEP_ALIVE_SECONDS:
            quiet = 0.0
            yield events.KEEP_ALIVE
        await asyncio.sleep(POLL_SECONDS)
        quiet += POLL_SECONDS


def row_events(
    rows: Sequence[Any], shown: dict[str, tuple[str, str]], now: datetime, *, first: bool
) -> list[str]:
    """The events that bring a page showing `shown` to `rows`, and `shown` updated. The first
    look only learns what the page (just drawn) shows: it sends nothing."""
    news: list[str] = []
    seen = set()
    counts = {name: 0 for name, _ in GROUPS}
    for row in rows:
        group = group_of(row)
        counts[group] += 1
        seen.add(row.run_id)
        html = fragment("_run_row.html", {"row": row, "group": group, "now": now})
        before = shown.get(row.run_id)
        shown[row.run_id] = (group, html)
        if first or before == (group, html):
            continue
        element = f"run-{row.run_id}"
        if before is not None and before[0] != group:
            news.append(events.remove(element))
        news.append(events.replace(element, html, parent=f"rows-{group}", where="start"))
    for gone in [run_id for run_id in shown if run_id not in seen]:
        news.append(events.remove(f"run-{gone}"))
        del shown[gone]
    if news:
        for name, count in counts.items():
            html = fragment("_group_count.html", {"group": name, "count": count})
            news.append(events.replace(f"count-{name}", html))
    return news


routes: list[BaseRoute] = [
    Route("/", runs_list, methods=["GET"]),
    Route("/runs/events", runs_events, methods=["GET"]),
]
