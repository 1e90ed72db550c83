# ruff: noqa: E501  (the page's SVG and CSS read better on one line each)
"""Draw the Grafana dashboard's panels from real data, without Grafana (not installable here).

    .venv/bin/python scripts/dashboard_shot.py [--minutes 4] [--out docs/images/dashboard.png]

Starts a dev server, `python worker.py` serving metrics, and a real Prometheus (Debian's
`prometheus`) scraping it every second; runs a mix of real local runs with the sample agent
(crashing once, stalling, finishing slowly, out of budget and then extended) for `--minutes`;
then asks Prometheus for every panel's PromQL from deploy/grafana/overnight.json over that
window, draws each panel as an SVG in the dashboard's layout, and photographs the page with
the system Chromium (Playwright). Panels whose metrics nothing fed (no provider but the local
one ran) say "no data", as Grafana would.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from temporalio.client import Client  # noqa: E402
from temporalio.contrib.pydantic import pydantic_data_converter  # noqa: E402

from bench.procs import dev_server  # noqa: E402
from overnight.cli import client as api  # noqa: E402
from overnight.cli.demo import AGENT_DIR, make_origin  # noqa: E402
from overnight.cli.outside_world import host_ports_for, ledger_url  # noqa: E402
from overnight.grants import WRITABLE_BIND_ROOTS_ENV  # noqa: E402
from overnight.home import HOME_ENV  # noqa: E402
from overnight.models import BudgetExtension, RunSpec  # noqa: E402
from overnight.worker.telemetry import METRICS_ADDRESS_ENV, RUNS_EVERY_ENV  # noqa: E402

DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "overnight.json"
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
COMMAND = "python3 /workspace/agent/main.py --resume /workspace/checkpoint.json"


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spec(run_id: str, root: Path, agent_env: dict[str, str], **fields: Any) -> RunSpec:
    files = make_origin(root / run_id)
    ledger = ledger_url(files.ledger)
    return RunSpec.model_validate(
        {
            "run_id": run_id,
            "repo": str(files.origin),
            "binds": [{"path": str(files.origin), "writable": True}],
            "agent_dir": str(AGENT_DIR),
            "command": COMMAND,
            "env": {"OVERNIGHT_LEDGER_URL": ledger, **agent_env},
            "host_ports": host_ports_for(ledger),
            "poll_seconds": 5,
            "stall_seconds": 20,
            "sandbox_timeout_seconds": 900,
            **fields,
        }
    )


async def drive_runs(client: Client, queue: str, root: Path, minutes: float) -> list[str]:
    """Start runs of every kind, a few at a time, for `minutes`; extend the stuck ones late."""
    kinds: list[tuple[str, dict[str, str], dict[str, Any]]] = [
        ("crash", {"AGENT_DIE_AFTER": "2", "AGENT_STEP_DELAY": "6"}, {}),
        ("slow", {"AGENT_STEP_DELAY": "12"}, {}),
        ("stall", {"AGENT_STALL_AT": "3", "AGENT_STEP_DELAY": "4"}, {}),
        (
            "stuck",
            {"AGENT_DIE_AFTER": "1", "AGENT_STEP_DELAY": "3"},
            {"budget": {"max_restarts": 0}},
        ),
        ("crash", {"AGENT_DIE_AFTER": "3", "AGENT_STEP_DELAY": "5"}, {}),
    ]
    started: list[str] = []
    end = time.monotonic() + minutes * 60
    wave = 0
    while time.monotonic() < end - 60:
        for kind, env, fields in kinds:
            run_id = f"shot-{kind}-{wave}-{os.urandom(2).hex()}"
            await api.start_run(client, spec(run_id, root, env, **fields), task_queue=queue)
            started.append(run_id)
            await asyncio.sleep(4)
        wave += 1
        await asyncio.sleep(20)
        if wave == 2:
            for run_id in started:
                if "-stuck-0-" in run_id:
                    await api.extend_budget(client, run_id, BudgetExtension(restarts=1))
    await asyncio.sleep(max(0.0, end - time.monotonic()))
    return started


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


def photograph(page_html: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    page_file = out.resolve().with_suffix(".html")
    page_file.write_text(page_html)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=shutil.which("chromium") or "/usr/bin/chromium"
        )
        page = browser.new_page(viewport={"width": 24 * 58 + 16, "height": 900})
        page.goto(page_file.as_uri())
        page.screenshot(path=str(out), full_page=True)
        browser.close()
    page_file.unlink()


async def main(minutes: float, out: Path) -> None:
    prometheus_bin = shutil.which("prometheus")
    if prometheus_bin is None:
        raise SystemExit("needs the Debian package prometheus")
    state = Path(tempfile.mkdtemp(prefix="overnight-dashboard-shot-"))
    os.environ[HOME_ENV] = str(state / "home")
    os.environ[WRITABLE_BIND_ROOTS_ENV] = str(state)
    metrics_port, prometheus_port = free_port(), free_port()
    config = state / "prometheus.yml"
    config.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "5s"},
                "scrape_configs": [
                    {
                        "job_name": "overnight-worker",
                        "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}],
                    }
                ],
            }
        )
    )
    prometheus_url = f"http://127.0.0.1:{prometheus_port}"
    async with dev_server(state) as server:
        client = await Client.connect(
            server.address, namespace=server.namespace, data_converter=pydantic_data_converter
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TEMPORAL_"))}
        env |= {
            "TEMPORAL_ADDRESS": server.address,
            "TEMPORAL_NAMESPACE": server.namespace,
            METRICS_ADDRESS_ENV: f"127.0.0.1:{metrics_port}",
            RUNS_EVERY_ENV: "2",
        }
        queue = "dashboard-shot"
        log = (state / "worker.log").open("w")
        worker = subprocess.Popen(
            [sys.executable, str(REPO_ROOT / "worker.py"), "--task-queue", queue],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        prometheus = subprocess.Popen(
            [
                prometheus_bin,
                f"--config.file={config}",
                f"--storage.tsdb.path={state / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prometheus_port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        runs: list[str] = []
        try:
            while "worker polling" not in (state / "worker.log").read_text():
                await asyncio.sleep(0.2)
            await asyncio.sleep(5)  # Prometheus has the counters at 0
            start = time.time()
            runs = await drive_runs(client, queue, state / "origins", minutes)
            end = time.time()
            page = await asyncio.to_thread(render, prometheus_url, start, end)
            await asyncio.to_thread(photograph, page, out)
            print(f"wrote {out} ({len(runs)} runs over {minutes:g} min; state in {state})")
        finally:
            for run_id in runs:
                try:
                    await api.cancel_run(client, run_id, "dashboard shot over")
                except Exception:  # noqa: BLE001 (already ended)
                    pass
            await asyncio.sleep(5)
            worker.send_signal(signal.SIGTERM)
            prometheus.terminate()
            worker.wait(60)
            prometheus.wait(30)
            log.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="scripts/dashboard_shot.py")
    parser.add_argument("--minutes", type=float, default=4)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "images" / "dashboard.png")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(args.minutes, args.out))
