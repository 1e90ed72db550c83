"""The worker's telemetry, from its environment: Prometheus metrics and OpenTelemetry traces.

- `OVERNIGHT_METRICS_ADDRESS` (`host:port`): the Temporal SDK serves Prometheus metrics at
  `http://host:port/metrics`, its own and overnight's (overnight/core/metrics.py), which the
  workflows and activities record through the SDK's meters. Off unless set.
- `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`): spans of every
  workflow, activity, signal, query and update, through `temporalio.contrib.opentelemetry`,
  sent over OTLP/HTTP (the other standard `OTEL_*` variables apply). Needs the `tracing` extra
  (`pip install 'overnight[tracing]'`). Off unless set.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import Interceptor
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from overnight.core import metrics
from overnight.worker.fleet import FLEET_EVERY_SECONDS

METRICS_ADDRESS_ENV = "OVERNIGHT_METRICS_ADDRESS"
# Seconds between two counts of the runs by state (overnight/worker/fleet.py).
RUNS_EVERY_ENV = "OVERNIGHT_METRICS_RUNS_EVERY"
OTLP_ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
SERVICE_NAME = "overnight-worker"


class TelemetryError(ValueError):
    """A telemetry setting that cannot work (the worker refuses to start, exit code 2)."""


@dataclass
class Telemetry:
    metrics_address: str | None = None
    otlp_endpoint: str | None = None
    runs_every_seconds: float = FLEET_EVERY_SECONDS
    # The tracer provider `interceptors` made (shut down, so flushed, by `shutdown`).
    tracer_provider: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Telemetry:
        address = env.get(METRICS_ADDRESS_ENV, "").strip() or None
        if address is not None:
            check_metrics_address(address)
        endpoints = (env.get(name, "").strip() for name in OTLP_ENDPOINT_ENVS)
        endpoint = next((e for e in endpoints if e), None)
        every = env.get(RUNS_EVERY_ENV, "").strip()
        try:
            seconds = float(every) if every else FLEET_EVERY_SECONDS
        except ValueError:
            seconds = 0
        if not 0.1 <= seconds <= 3600:
            raise TelemetryError(f"{RUNS_EVERY_ENV} must be 0.1 to 3600 seconds, not {every!r}")
        return cls(metrics_address=address, otlp_endpoint=endpoint, runs_every_seconds=seconds)

    def runtime(self) -> Runtime | None:
        """A Temporal runtime serving Prometheus metrics; None (the default runtime) without."""
        if self.metrics_address is None:
            return None
        prometheus = PrometheusConfig(
            bind_address=self.metrics_address,
            histogram_bucket_overrides={
                metrics.EXIT_NOTICED.name: list(metrics.EXIT_NOTICED_BUCKETS)
            },
        )
        try:
            return Runtime(telemetry=TelemetryConfig(metrics=prometheus))
        except Exception as error:  # the SDK's core raises a plain exception (port taken)
            why = f"cannot serve metrics on {self.metrics_address}: {error}"
            raise TelemetryError(why) from error

    def interceptors(self) -> list[Interceptor]:
        """The tracing interceptor (client and worker) when an OTLP endpoint is set."""
        if self.otlp_endpoint is None:
            return []
        interceptor, self.tracer_provider = tracing_interceptor()
        return [interceptor]

    def shutdown(self) -> None:
        """Send the spans still held (a stopping worker's last ones)."""
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()
            self.tracer_provider = None

    def describe(self) -> str:
        parts = [
            f"metrics at http://{self.metrics_address}/metrics" if self.metrics_address else "",
            f"traces to {self.otlp_endpoint}" if self.otlp_endpoint else "",
        ]
        return ", ".join(p for p in parts if p) or "no metrics, no traces"


def check_metrics_address(address: str) -> None:
    host, sep, port = address.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise TelemetryError(f"{METRICS_ADDRESS_ENV} must be host:port, not {address!r}")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if host != "localhost":
            raise TelemetryError(
                f"{METRICS_ADDRESS_ENV}: the host must be an IP address (e.g. 0.0.0.0 or "
                f"127.0.0.1) or localhost, not {host!r}"
            ) from None


def tracing_interceptor(span_exporter: Any = None) -> tuple[Interceptor, Any]:
    """Temporal's OpenTelemetry tracing interceptor, and its tracer provider exporting over
    OTLP/HTTP (or to `span_exporter`), also installed as the process's tracer provider (if it
    has none yet) for spans of the worker's own code."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import SERVICE_NAME as SERVICE_NAME_KEY
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from temporalio.contrib.opentelemetry import TracingInterceptor
    except ImportError as error:
        raise TelemetryError(
            f"tracing needs the OpenTelemetry packages ({error.name} is missing): "
            "pip install 'overnight[tracing]'"
        ) from None
    if span_exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter()  # the endpoint and headers from OTEL_* variables
    name = os.environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME_KEY: name}))
    provider.add_span_processor(BatchSpanProcessor(span_exporter))
    trace.set_tracer_provider(provider)
    # Workflow spans even for runs started without a trace (the CLI, a Schedule).
    interceptor = TracingInterceptor(
        provider.get_tracer(__name__), always_create_workflow_spans=True
    )
    return interceptor, provider
