"""The worker's telemetry settings (overnight/worker/telemetry.py), and OpenTelemetry traces of
a run sent over OTLP/HTTP to a tiny receiver when `OTEL_EXPORTER_OTLP_ENDPOINT` is set."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import pytest_asyncio
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from fakes.activities import FakeWorld, exits, progress
from overnight.worker import binaries
from overnight.worker.telemetry import (
    METRICS_ADDRESS_ENV,
    RUNS_EVERY_ENV,
    Telemetry,
    TelemetryError,
)
from tests.conftest import REPO_ROOT, free_port
from tests.waits import CAP
from tests.workflows.harness import make_spec, started_run


def test_nothing_is_on_unless_set() -> None:
    telemetry = Telemetry.from_env({})
    assert telemetry.runtime() is None
    assert telemetry.interceptors() == []
    assert telemetry.describe() == "no metrics, no traces"


@pytest.mark.parametrize(
    "address", ["9464", "localhost", "example.com:9464", "0.0.0.0:0", "0.0.0.0:99999", ":9464"]
)
def test_a_bad_metrics_address_is_refused_naming_the_variable(address: str) -> None:
    with pytest.raises(TelemetryError, match=METRICS_ADDRESS_ENV):
        Telemetry.from_env({METRICS_ADDRESS_ENV: address})


@pytest.mark.parametrize("every", ["0", "-1", "soon", "7200"])
def test_a_bad_runs_interval_is_refused(every: str) -> None:
    with pytest.raises(TelemetryError, match=RUNS_EVERY_ENV):
        Telemetry.from_env({RUNS_EVERY_ENV: every})


def test_the_worker_refuses_a_bad_address_at_start_with_exit_code_2() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
    env |= {METRICS_ADDRESS_ENV: "metrics:9464", "TEMPORAL_ADDRESS": "127.0.0.1:1"}
    ran = subprocess.run(
        [sys.executable, str(REPO_ROOT / "worker.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2, ran.stderr
    assert f"error: {METRICS_ADDRESS_ENV}: the host must be an IP address" in ran.stderr


def test_a_taken_metrics_port_is_a_clear_error() -> None:
    address = f"127.0.0.1:{free_port()}"
    first = Telemetry.from_env({METRICS_ADDRESS_ENV: address}).runtime()
    assert first is not None
    with pytest.raises(TelemetryError, match=f"cannot serve metrics on {address}"):
        Telemetry.from_env({METRICS_ADDRESS_ENV: address}).runtime()


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver on the loopback: the span names it was sent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.span_names: list[str] = []


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:  # noqa: N802 (the http.server interface)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    self.server.span_names += [span.name for span in scope.spans]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest_asyncio.fixture(loop_scope="session")
async def private_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=str(binaries.test_server_path()),
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


async def test_a_run_is_traced_over_otlp_when_an_endpoint_is_set(
    private_env: WorkflowEnvironment, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")  # ms: export soon, not in 5 s
    telemetry = Telemetry.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})
    assert telemetry.describe() == f"traces to {endpoint}"
    client = Client(**{**private_env.client.config(), "interceptors": telemetry.interceptors()})
    world = FakeWorld()
    world.script(1, [progress("cp-1"), exits(1)])
    world.script(2, [exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        await handle.result()

    wanted = {
        "StartWorkflow:AgentRun",
        "RunWorkflow:AgentRun",
        "StartActivity:create_sandbox",
        "RunActivity:create_sandbox",
        "RunActivity:observe_agent",
        "RunActivity:pause_sandbox",
    }
    deadline = time.monotonic() + CAP
    while not wanted <= set(receiver.span_names) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    telemetry.shutdown()
    assert wanted <= set(receiver.span_names), sorted(set(receiver.span_names))
