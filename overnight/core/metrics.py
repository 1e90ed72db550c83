"""The names of overnight's own metrics, in one list: the workflow, the activities and the
worker record them through the Temporal SDK's meters; the dashboard, the alert rules and
docs/metrics.md read them by these names.

Recorded only when the worker serves metrics (`OVERNIGHT_METRICS_ADDRESS`): without it the
SDK's meters are no-ops. Every name starts with `overnight_`; the SDK adds the attributes
`namespace` and `task_queue` (and `workflow_type` or `activity_type`) to each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from temporalio import activity

MetricKind = Literal["counter", "histogram", "gauge"]


@dataclass(frozen=True)
class Metric:
    name: str
    kind: MetricKind
    description: str
    # The attributes overnight adds (each with a bounded set of values).
    labels: tuple[str, ...] = ()
    unit: str = ""


RUN_TRANSITIONS = Metric(
    "overnight_run_transitions_total",
    "counter",
    "Runs that entered a state (the state the status query and OvernightState show)",
    ("state",),
)
RESTARTS = Metric(
    "overnight_restarts_total",
    "counter",
    "Restarts in a new sandbox from the last checkpoint, by what caused them",
    ("cause", "counted"),
)
LEASE_EXTENSIONS = Metric(
    "overnight_lease_extensions_total",
    "counter",
    "Lease extensions of a progressing agent's sandbox, by outcome",
    ("outcome",),
)
LEASE_END_WAKES = Metric(
    "overnight_lease_end_wakes_total",
    "counter",
    "Sandboxes found paused at their lease end and woken (or not), by outcome",
    ("outcome",),
)
SPEND = Metric(
    "overnight_spend_micros_total",
    "counter",
    "Spend the runs' budgets counted, in millionths of a US dollar, by kind: `sandbox` "
    "(provider figures where read, else estimates) and `model` (what agents reported)",
    ("kind",),
    unit="microUSD",
)
SANDBOX_ENDS = Metric(
    "overnight_sandbox_ends_total",
    "counter",
    "Sandboxes the worker paused (kept for a look, or until woken) or stopped",
    ("how",),
)
EXIT_NOTICED = Metric(
    "overnight_exit_noticed_seconds",
    "histogram",
    "From an agent process's exit to the worker's watch answering with it (crash-to-noticed)",
    ("exit",),
    unit="s",
)
PROVIDER_REQUESTS = Metric(
    "overnight_provider_requests_total",
    "counter",
    "HTTP requests the worker sent to a provider's API (each retry counts), by answer",
    ("provider", "method", "status"),
)
RUNS = Metric(
    "overnight_runs",
    "gauge",
    "Open runs in each state, counted in the namespace's visibility (every worker reports "
    "the whole namespace: take max across workers)",
    ("state",),
)

EGRESS_REFUSED = Metric(
    "overnight_egress_refused_total",
    "counter",
    "Connections of runs' sandboxes that their network refused (a name off the run's "
    "allow-list, or an address no sandbox may reach)",
)
ALL = (
    RUN_TRANSITIONS,
    RESTARTS,
    LEASE_EXTENSIONS,
    LEASE_END_WAKES,
    SPEND,
    SANDBOX_ENDS,
    EXIT_NOTICED,
    PROVIDER_REQUESTS,
    RUNS,
    EGRESS_REFUSED,
)

# Buckets for the exit-to-noticed histogram, in seconds: from an inotify-fast local watch
# (tens of ms) to a poll of minutes.
EXIT_NOTICED_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


def count_in_activity(metric: Metric, attributes: dict[str, str], value: int = 1) -> None:
    """Add to a counter through the current activity's meter; outside an activity (a provider
    used by the CLI or a benchmark) nothing is recorded."""
    if activity.in_activity():
        counter = activity.metric_meter().create_counter(metric.name, metric.description)
        counter.add(value, attributes)


def observe_in_activity(metric: Metric, attributes: dict[str, str], value: float) -> None:
    """Record a histogram value through the current activity's meter (outside one: nothing)."""
    if activity.in_activity():
        meter = activity.metric_meter()
        histogram = meter.create_histogram_float(metric.name, metric.description, metric.unit)
        histogram.record(value, attributes)
