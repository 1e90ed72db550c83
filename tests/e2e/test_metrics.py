"""Metrics end to end: a real Prometheus scrapes `python worker.py` (OVERNIGHT_METRICS_ADDRESS)
while it supervises real runs on the session's dev server (local sandboxes, the sample agent
crashing), and PromQL through Prometheus's HTTP API reads back what the runs did. The alert
rules load in that Prometheus and pass `promtool check rules` and `promtool test rules`.

Skipped, saying why, where the Debian package `prometheus` is not installed (scripts/test
installs it).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from temporalio.client import Client

from overnight.cli import client as api
from overnight.core.grants import WRITABLE_BIND_ROOTS_ENV
from overnight.worker.devserver import DevServer
from overnight.worker.telemetry import METRICS_ADDRESS_ENV, RUNS_EVERY_ENV
from tests.conftest import REPO_ROOT, free_ports, scratch_root
from tests.e2e.helpers import agent_spec, new_run_id, wait_for_status
from tests.live import worker_process
from tests.waits import CAP

RULES = REPO_ROOT / "deploy" / "prometheus" / "overnight-alerts.yml"
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "overnight.json"
RULES_TEST = REPO_ROOT / "deploy" / "prometheus" / "overnight-alerts.test.yml"
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="the Debian package prometheus is not installed (scripts/test installs it)",
)


@needs_prometheus
def test_the_config_and_alert_rules_pass_promtool() -> None:
    assert PROMTOOL is not None
    checked = subprocess.run(
        [PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 4 rules found" in checked.stdout
    config = REPO_ROOT / "deploy" / "prometheus" / "prometheus.yml"
    checked = subprocess.run(
        [PROMTOOL, "check", "config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [PROMTOOL, "test", "rules", RULES_TEST.name],
        cwd=RULES_TEST.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


@pytest.fixture
def ports() -> Iterator[tuple[int, int]]:
    metrics_port, prometheus_port = free_ports(2)
    yield metrics_port, prometheus_port


@pytest_asyncio.fixture(loop_scope="session")
async def metrics_worker(
    dev_server: DevServer, ports: tuple[int, int], tmp_path: Path
) -> AsyncIterator[str]:
    """`python worker.py` on a task queue of its own, serving metrics; yields the queue."""
    queue = f"metrics-{new_run_id('q')[2:]}"
    env = {
        METRICS_ADDRESS_ENV: f"127.0.0.1:{ports[0]}",
        RUNS_EVERY_ENV: "0.5",
        WRITABLE_BIND_ROOTS_ENV: str(scratch_root()),
    }
    async with worker_process(dev_server, queue, tmp_path / "worker.log", env):
        yield queue


@pytest.fixture
def prometheus(ports: tuple[int, int], tmp_path: Path) -> Iterator[str]:
    """A real Prometheus scraping the worker every 0.5 s, with the alert rules; its URL."""
    assert PROMETHEUS is not None
    metrics_port, prometheus_port = ports
    config = {
        "global": {"scrape_interval": "500ms", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": "overnight-worker",
                "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}],
            }
        ],
    }
    config_file = tmp_path / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    log = (tmp_path / "prometheus.log").open("w")
    server = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config_file}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prometheus_port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield f"http://127.0.0.1:{prometheus_port}"
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def dashboard_queries() -> list[tuple[str, str]]:
    """Each panel's title and query, with Grafana's variables as a person would pick them."""
    dashboard = json.loads(DASHBOARD.read_text())
    return [
        (
            panel["title"],
            target["expr"].replace("$namespace", ".*").replace("$__rate_interval", "1m"),
        )
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


def rules_loaded(prometheus: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{prometheus}/api/v1/rules", timeout=CAP) as answer:
        body: dict[str, Any] = json.load(answer)
    return body


def promql(prometheus: str, query: str) -> list[dict[str, object]]:
    url = f"{prometheus}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
    with urllib.request.urlopen(url, timeout=CAP) as answer:
        body = json.load(answer)
    assert body["status"] == "success", body
    result: list[dict[str, object]] = body["data"]["result"]
    return result


async def value_of(prometheus: str, query: str, want: float, timeout: float = CAP) -> float:
    """The query's single value once it is at least `want` (or what it was at the timeout)."""
    deadline = time.monotonic() + timeout
    value = float("nan")
    while time.monotonic() < deadline:
        try:
            result = await asyncio.to_thread(promql, prometheus, query)
        except OSError:
            result = []  # Prometheus still starting
        if result:
            sample = result[0]["value"]
            assert isinstance(sample, list)
            value = float(sample[1])
            if value >= want:
                return value
        await asyncio.sleep(0.5)
    return value


@needs_prometheus
async def test_prometheus_reads_what_the_runs_did(
    dev_client: Client,
    metrics_worker: str,
    prometheus: str,
    tmp_path: Path,
    runs: list[str],
) -> None:
    # Prometheus has scraped the worker's counters at 0, as it would a worker up for a while.
    scraped = await value_of(prometheus, 'count(overnight_restarts_total{cause="crashed"})', 1)
    assert scraped == 1, "Prometheus does not scrape the worker"

    # One run left waiting for a person after its agent crashed, then one whose agent crashes
    # once and finishes. One after the other: a histogram's series is born at its first
    # observation (it cannot start at 0 as the counters do), so `rate()` sees only the second.
    crashing = new_run_id("metrics-crash")
    stuck = new_run_id("metrics-stuck")
    runs += [crashing, stuck]
    spec, _ = agent_spec(
        stuck, tmp_path, agent_env={"AGENT_DIE_AFTER": "1"}, budget={"max_restarts": 0}
    )
    await api.start_run(dev_client, spec, task_queue=metrics_worker)
    await wait_for_status(dev_client, stuck, lambda s: s.state == "needs_attention")
    first = 'sum(overnight_exit_noticed_seconds_count{exit="nonzero"})'
    assert await value_of(prometheus, first, 1) == 1
    # $36 a vCPU-hour: even a second's spend shows at the status's 1/10,000 of a dollar.
    spec, _ = agent_spec(
        crashing, tmp_path, agent_env={"AGENT_DIE_AFTER": "2"}, rates={"vcpu_hour_usd": 36.0}
    )
    await api.start_run(dev_client, spec, task_queue=metrics_worker)
    result = await asyncio.wait_for(api.wait_result(dev_client, crashing), timeout=60)
    assert result.outcome == "finished" and result.restarts == 1
    # Whatever the sandbox ran for (under a second on a fast machine), the counter has at least it.
    sandbox_micros = round(result.spend_usd * 1_000_000)
    assert sandbox_micros > 0

    checks = {
        # overnight's, recorded by the workflows through the replay-safe meter
        'sum(overnight_restarts_total{cause="crashed",counted="true"})': 1,
        'sum(overnight_run_transitions_total{state="finished"})': 1,
        'sum(overnight_run_transitions_total{state="needs_attention"})': 1,
        'sum(overnight_run_transitions_total{state="starting"})': 2,
        'sum(overnight_spend_micros_total{kind="sandbox"})': sandbox_micros,
        # recorded by the activities: two crashes noticed, sandboxes paused and stopped
        'sum(overnight_exit_noticed_seconds_count{exit="nonzero"})': 2,
        'sum(overnight_sandbox_ends_total{how="paused"})': 2,
        'sum(overnight_sandbox_ends_total{how="stopped"})': 1,
        # counted in visibility by the worker
        'max(overnight_runs{state="needs_attention"})': 1,
        # the SDK's own
        'sum(temporal_workflow_completed{workflow_type="AgentRun"})': 1,
        "sum(temporal_activity_execution_latency_count)": 5,
    }
    seen = {query: await value_of(prometheus, query, want) for query, want in checks.items()}
    short = {q: (seen[q], want) for q, want in checks.items() if not seen[q] >= want}
    assert not short, f"(seen, wanted) of the queries short of what the runs did: {short}"
    # Exactly: nothing counted twice (the crash's restart, the one run that finished).
    assert seen['sum(overnight_restarts_total{cause="crashed",counted="true"})'] == 1
    assert seen['sum(overnight_run_transitions_total{state="finished"})'] == 1
    # The crash was noticed within the histogram's range, not at its overflow bucket.
    slow = 'sum(overnight_exit_noticed_seconds_bucket{exit="nonzero",le="10"})'
    assert await value_of(prometheus, slow, 2) == 2

    # Every query of the dashboard is valid PromQL here; the panels this test fed show more
    # than zeros.
    fed = {
        "Runs by state",
        "Waiting for a person",
        "States entered",
        "Restarts by cause",
        "Crash-to-noticed",
        "Sandboxes paused and stopped",
        "Spend an hour",
        "Cached runs and tasks in flight",
    }
    shown: dict[str, bool] = {}
    for title, query in dashboard_queries():
        result = await asyncio.to_thread(promql, prometheus, query)
        values = [float(str(sample["value"][1])) for sample in result]  # type: ignore[index]
        shown[title] = shown.get(title, False) or any(v > 0 for v in values)
    empty = fed - {title for title, data in shown.items() if data}
    assert not empty, f"panels without data: {sorted(empty)}"

    # The waiting run leaves the gauge once cancelled.
    await api.cancel_run(dev_client, stuck, "test over")
    await asyncio.wait_for(api.wait_result(dev_client, stuck), timeout=CAP)
    deadline = time.monotonic() + CAP
    left = 'max(overnight_runs{state="needs_attention"})'
    while await value_of(prometheus, left, 0, timeout=1) > 0:
        assert time.monotonic() < deadline, "the cancelled run is still counted as waiting"
        await asyncio.sleep(0.5)
    groups = (await asyncio.to_thread(rules_loaded, prometheus))["data"]["groups"]
    assert [len(g["rules"]) for g in groups] == [4], "the alert rules load in Prometheus"
