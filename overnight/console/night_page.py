"""The night (`/night`, `/night.csv`): runs by outcome, spend by day and owner, restarts by
cause, what the safety net cost and the hours runs were held for people, over a range given
as GET parameters (`since`/`until` UTC days, or `span` like `7d`; the last 24 hours by
default), as charts drawn on the server (overnight/console/charts.py) and as a CSV of the
runs they add up.

One visibility read of the range's runs (their rows: search attributes and row memo), no
query per run; the sums are `overnight report`'s (overnight/console/night.py).
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from urllib.parse import urlencode

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from overnight.console import charts
from overnight.console.auth import viewer
from overnight.console.context import console_of
from overnight.console.night import Night, NightRange, csv_rows, night_of, night_range
from overnight.console.render import SECURITY_HEADERS, page
from overnight.console.rows import RunRow
from overnight.console.runs_source import RunsSource

# The most runs a night reads (a page, not an archive).
MOST_RUNS = 10_000


async def rows_in(request: Request, span: NightRange) -> list[RunRow]:
    context = console_of(request)
    source = context.runs if isinstance(context.runs, RunsSource) else RunsSource(context.client)
    also = (
        f"StartTime < '{span.until.isoformat()}' AND "
        f"(ExecutionStatus = 'Running' OR CloseTime >= '{span.since.isoformat()}')"
    )
    return await source.search(also=also, limit=MOST_RUNS)


async def night_view(request: Request) -> Response:
    await viewer(request)
    span = night_range(request.query_params, datetime.now(UTC))
    night = night_of(await rows_in(request, span), span)
    query = _query(request)
    return page(
        request,
        "night.html",
        {"night": night, "span": span, "charts": night_charts(night), "csv_query": query},
    )


async def night_csv(request: Request) -> Response:
    await viewer(request)
    span = night_range(request.query_params, datetime.now(UTC))
    night = night_of(await rows_in(request, span), span)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(csv_rows(night))
    name = f"overnight-night-{span.since:%Y%m%d}-{span.until:%Y%m%d}.csv"
    headers = {
        **SECURITY_HEADERS,
        "cache-control": "no-store",
        "content-disposition": f'attachment; filename="{name}"',
    }
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8", headers=headers)


def night_charts(night: Night) -> dict[str, Markup]:
    """The page's charts, by name."""
    totals = night.totals
    days = night.range.days
    labels = [f"{day:%b %d}" for day in days]
    shown = charts.top(night.spend_by_owner)
    series: list[tuple[str, list[float]]] = [
        (owner, [night.spend_by_day.get(day, {}).get(owner, 0.0) for day in days])
        for owner in shown
    ]
    rest = [o for o in night.spend_by_owner if o not in shown]
    if rest:
        series.append(
            (
                "others",
                [sum(night.spend_by_day.get(day, {}).get(o, 0.0) for o in rest) for day in days],
            )
        )
    net = [
        ("sandboxes", totals.sandbox_usd),
        ("model", totals.model_usd),
        ("safety net", totals.safety_net_usd),
    ]
    return {
        "outcomes": charts.bars(
            "outcomes",
            "Runs by outcome",
            [(name.replace("_", " "), n) for name, n in totals.by_outcome.items()],
        ),
        "spend_by_day": charts.stacked_columns(
            "spend-by-day", "Spend by day and owner", labels, series, charts.money
        ),
        "spend_by_owner": charts.bars(
            "spend-by-owner",
            "Spend by owner",
            [(owner, night.spend_by_owner[owner]) for owner in night.owners],
            charts.money,
        ),
        "restarts": charts.bars(
            "restarts",
            "Restarts by cause",
            [(cause.replace("_", " "), n) for cause, n in totals.restarts_by_cause.items()],
        ),
        "safety_net": charts.bars("safety-net", "What the night cost", net, charts.money),
        "people": charts.stacked_columns(
            "people",
            "Hours held for people, by day",
            labels,
            [
                ("out of budget, waiting", [night.attention_by_day.get(d, 0.0) for d in days]),
                ("questions and waits", [night.wait_by_day.get(d, 0.0) for d in days]),
            ],
            charts.hours,
        ),
    }


def _query(request: Request) -> str:
    """The range's own parameters, for the CSV link and the form."""
    asked = {key: request.query_params.get(key, "")[:40] for key in ("since", "until", "span")}
    return urlencode({key: value for key, value in asked.items() if value})


routes: list[BaseRoute] = [
    Route("/night", night_view, methods=["GET"]),
    Route("/night.csv", night_csv, methods=["GET"]),
]
