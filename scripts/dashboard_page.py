# ruff: noqa: E501  (the page's SVG and CSS read better on one line each)
"""The page of scripts/dashboard_shot.py: each panel of deploy/grafana/overnight.json asked of
Prometheus over the window (its PromQL, as Grafana would ask it) and drawn as an SVG chart,
a stat or "no data", laid out on Grafana's grid in one HTML page. Apart from the stack the
script runs (dev server, worker, Prometheus, the runs): the drawing needs only Prometheus's
HTTP API, so it reads on its own. Standard library only.
"""

from __future__ import annotations

import html
import json
import math
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parent.parent / "deploy" / "grafana" / "overnight.json"
COLORS = [
    "#73bf69",
    "#f2cc0c",
    "#5794f2",
    "#ff780a",
    "#f2495c",
    "#b877d9",
    "#8ab8ff",
    "#fade2a",
    "#37872d",
    "#c4162a",
    "#1f60c4",
    "#fa6400",
    "#8f3bb8",
    "#96d98d",
    "#ffb357",
    "#ca95e5",
]
# Bars count what happened in each step (`$__rate_interval` = the step: windows that do not
# overlap); lines are smoother over a minute.
STEP_SECONDS = 15


def query(prometheus: str, path: str, **params: str) -> list[dict[str, Any]]:
    url = f"{prometheus}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=30) as answer:
        body = json.load(answer)
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def legend(template: str, labels: dict[str, str]) -> str:
    text = template
    for key, value in labels.items():
        text = text.replace("{{" + key + "}}", value)
    return text or "value"


def panel_data(
    prometheus: str, panel: dict[str, Any], start: float, end: float
) -> tuple[list[Any], bool]:
    """Each series of the panel, without those that stayed at 0 (the counters' zero series),
    and whether the queries found any series at all."""
    series: list[tuple[str, Any]] = []
    found = False
    bars = (
        panel.get("fieldConfig", {}).get("defaults", {}).get("custom", {}).get("drawStyle")
        == "bars"
    )
    window = f"{STEP_SECONDS}s" if bars else "1m"
    for target in panel.get("targets", []):
        expr = target["expr"].replace("$namespace", ".*").replace("$__rate_interval", window)
        if panel["type"] == "stat":
            for item in query(prometheus, "query", query=expr, time=str(end)):
                series.append(
                    (legend(target["legendFormat"], item["metric"]), float(item["value"][1]))
                )
                found = True
            continue
        step = str(STEP_SECONDS if bars else 5)
        result = query(
            prometheus, "query_range", query=expr, start=str(start), end=str(end), step=step
        )
        found = found or bool(result)
        for item in result:
            points = [(float(t), float(v)) for t, v in item["values"] if not math.isnan(float(v))]
            if any(v != 0 for _, v in points):
                series.append((legend(target["legendFormat"], item["metric"]), points))
    return series, found


def svg_chart(
    series: list[Any], width: int, height: int, start: float, end: float, unit: str, bars: bool
) -> str:
    left, bottom, top, right = 48, 18, 6, 22
    plot_w, plot_h = width - left - right, height - top - bottom
    stacked = bars
    totals: dict[float, float] = {}
    tops = []
    for _, points in series:
        for t, v in points:
            if stacked:
                totals[t] = totals.get(t, 0) + v
            tops.append(v)
    high = max(list(totals.values()) + tops + [0]) if (totals or tops) else 1
    high = high * 1.1 if high > 0 else 1

    def x(t: float) -> float:
        return left + (t - start) / (end - start) * plot_w

    def y(v: float) -> float:
        return top + plot_h - v / high * plot_h

    parts = [f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">']
    for i in range(5):
        value = high * i / 4
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#2c3235"/>'
        )
        parts.append(
            f'<text x="{left - 4}" y="{y(value) + 3:.1f}" fill="#8e8e8e" font-size="10" text-anchor="end">{fmt(value, unit)}</text>'
        )
    for i in range(5):
        t = start + (end - start) * i / 4
        label = time.strftime("%H:%M", time.gmtime(t))
        parts.append(
            f'<text x="{x(t):.1f}" y="{height - 4}" fill="#8e8e8e" font-size="10" text-anchor="middle">{label}</text>'
        )
    base: dict[float, float] = {}
    for index, (_, points) in enumerate(series):
        color = COLORS[index % len(COLORS)]
        if bars:
            w = max(1.5, plot_w / max(1, (end - start) / STEP_SECONDS) * 0.8)
            for t, v in points:
                if v <= 0:
                    continue
                b = base.get(t, 0)
                parts.append(
                    f'<rect x="{x(t) - w / 2:.1f}" y="{y(b + v):.1f}" width="{w:.1f}" height="{y(b) - y(b + v):.1f}" fill="{color}" opacity="0.85"/>'
                )
                base[t] = b + v
        else:
            path = " ".join(
                f"{'M' if i == 0 else 'L'}{x(t):.1f},{y(v):.1f}" for i, (t, v) in enumerate(points)
            )
            parts.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="1.6"/>')
    parts.append("</svg>")
    return "".join(parts)


def fmt(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"
    if unit == "currencyUSD":
        return f"${value:.3f}"
    if unit == "ms":
        return f"{value:.0f} ms"
    return f"{value:.2g}" if value < 10 else f"{value:.0f}"


def render(prometheus: str, start: float, end: float) -> str:
    dashboard = json.loads(DASHBOARD.read_text())
    column, row_height = 58, 30
    cells = []
    for panel in dashboard["panels"]:
        pos = panel["gridPos"]
        left, top = pos["x"] * column, pos["y"] * row_height
        width, height = pos["w"] * column - 6, pos["h"] * row_height - 6
        style = f"left:{left}px;top:{top}px;width:{width}px;height:{height}px"
        title = html.escape(panel["title"])
        if panel["type"] == "row":
            cells.append(f'<div class="row" style="{style}">{title}</div>')
            continue
        series, found = panel_data(prometheus, panel, start, end)
        unit = panel["fieldConfig"]["defaults"].get("unit", "short")
        if not series:
            what = "only zeros in this window" if found else "No data"
            body = f'<div class="empty">{what}</div>'
        elif panel["type"] == "stat":
            value = sum(v for _, v in series)
            color = "#ff780a" if value >= 1 and "Waiting" in panel["title"] else "#73bf69"
            body = f'<div class="stat" style="color:{color}">{fmt(value, unit)}</div>'
        else:
            bars = panel["fieldConfig"]["defaults"]["custom"].get("drawStyle") == "bars"
            chart = svg_chart(series, width - 12, height - 62, start, end, unit, bars)
            keys = "".join(
                f'<span><i style="background:{COLORS[i % len(COLORS)]}"></i>{html.escape(name)}</span>'
                for i, (name, _) in enumerate(series)
            )
            body = f'{chart}<div class="legend">{keys}</div>'
        cells.append(
            f'<div class="panel" style="{style}"><div class="title">{title}</div>{body}</div>'
        )
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"]) * row_height
    window = f"{time.strftime('%H:%M', time.gmtime(start))}-{time.strftime('%H:%M', time.gmtime(end))} UTC"
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>
body {{ background:#111217; color:#ccccdc; font-family:Inter,Helvetica,Arial,sans-serif; margin:0; }}
header {{ padding:10px 14px; font-size:18px; }} header small {{ color:#8e8e8e; font-size:12px; }}
main {{ position:relative; margin:0 8px; height:{bottom}px; width:{24 * column}px; }}
.panel, .row {{ position:absolute; box-sizing:border-box; }}
.panel {{ background:#181b1f; border:1px solid #2c3235; border-radius:2px; padding:6px; overflow:hidden; }}
.row {{ font-size:14px; font-weight:600; padding-top:6px; }}
.title {{ font-size:13px; font-weight:500; margin-bottom:4px; }}
.stat {{ font-size:44px; text-align:center; margin-top:40px; font-weight:500; }}
.empty {{ color:#8e8e8e; text-align:center; margin-top:50px; }}
.legend {{ font-size:11px; color:#ccccdc; }} .legend span {{ margin-right:10px; white-space:nowrap; }}
.legend i {{ display:inline-block; width:12px; height:3px; margin-right:4px; vertical-align:middle; }}
</style></head><body><header>overnight <small>deploy/grafana/overnight.json, drawn from a real
Prometheus by scripts/dashboard_shot.py (not Grafana) &middot; {window}</small></header>
<main>{"".join(cells)}</main></body></html>"""
