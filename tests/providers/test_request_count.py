"""`overnight_provider_requests_total`: every HTTP request the Runtime SDK sends from an
activity is counted by its method and answer, retries and 429s included, through the real SDK
against the loopback fake API, read back from a Temporal runtime's Prometheus endpoint."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.testing import ActivityEnvironment

from activities.providers.runtime.provider import RuntimeProvider
from fakes.runtime import FakeRuntime
from tests.conftest import free_port
from tests.waits import CAP


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRuntime]:
    with FakeRuntime.local(tmp_path / "runtime-home") as fake:
        fake.use(monkeypatch, tmp_path / "config")
        yield fake


def requests_counted(address: str, status: str) -> float:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=CAP) as answer:
        lines = answer.read().decode().splitlines()
    wanted = ("overnight_provider_requests_total{", 'method="GET"', 'provider="runtime"')
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in lines
        if all(part in line for part in wanted) and f'status="{status}"' in line
    )


async def test_each_request_is_counted_by_its_answer_429s_and_retries_included(
    fake: FakeRuntime,
) -> None:
    address = f"127.0.0.1:{free_port()}"
    runtime = Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=address)))
    activity = ActivityEnvironment()
    activity.metric_meter = runtime.metric_meter
    provider = RuntimeProvider(timeout_seconds=5, max_retries=2, call_budget_seconds=20)
    try:
        # The key's rate limit refuses the list twice; the SDK's own retries get it through.
        fault = fake.fail(2, 429, route="GET /v1/sandboxes", code="rate_limited", retry_after=0.05)
        await activity.run(provider.list, {}, include_stopped=True)
        assert fault.fired == 2
        assert requests_counted(address, "429") == 2
        assert requests_counted(address, "200") == 1

        # Outside an activity (the CLI's `reap`, a benchmark) nothing is recorded.
        await provider.list({}, include_stopped=True)
        assert requests_counted(address, "200") == 1
    finally:
        await provider.aclose()
