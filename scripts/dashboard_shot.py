"""Draw the Grafana dashboard's panels from real data, without Grafana (not installable here).

    .venv/bin/python scripts/dashboard_shot.py [--minutes 4] [--out docs/images/dashboard.png]

Starts a dev server, `python worker.py` serving metrics, and a real Prometheus (Debian's
`prometheus`) scraping it every second; runs a mix of real local runs with the sample agent
(crashing once, stalling, finishing slowly, out of budget and then extended) for `--minutes`;
then asks Prometheus for every panel's PromQL from deploy/grafana/overnight.json over that
window, draws each panel as an SVG in the dashboard's layout, and photographs the page with
the system Chromium (Playwright). Panels whose metrics nothing fed (no provider but the local
one ran) say "no data", as Grafana would.

The page itself (the panels asked of Prometheus and drawn) is scripts/dashboard_page.py; here
the stack, the runs that feed it and the photograph.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from temporalio.client import Client  # noqa: E402
from temporalio.contrib.pydantic import pydantic_data_converter  # noqa: E402

from bench.procs import dev_server  # noqa: E402
from overnight.cli import client as api  # noqa: E402
from overnight.core.grants import WRITABLE_BIND_ROOTS_ENV  # noqa: E402
from overnight.core.home import HOME_ENV  # noqa: E402
from overnight.core.models import BudgetExtension, RunSpec  # noqa: E402
from overnight.demo.outside_world import host_ports_for, ledger_url  # noqa: E402
from overnight.demo.sample_demo import AGENT_DIR, make_origin  # noqa: E402
from overnight.worker.telemetry import METRICS_ADDRESS_ENV, RUNS_EVERY_ENV  # noqa: E402
from scripts.dashboard_page import render  # noqa: E402

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
