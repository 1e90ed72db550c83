"""AgentRun's metrics, through the workflow's replay-safe meter (`workflow.metric_meter()`).

A metric call records nothing during replay and adds no command or history event, so
recording needs no patch, and a run replayed on another worker (a restart, a deploy, a cache
eviction) does not count again what it had counted: `RunMetrics` remembers what it has
counted as the code runs, replay or not, and records only the difference.

Counted from the published status (each `Publisher.publish`): states entered, restarts by
cause, sandbox and model spend; and at their steps: lease extensions and wakes after a lease end.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from overnight.core import metrics as names
    from overnight.core.models import RunStatus

# A restart's reason (workflows.pure.decide and agent_run write them) -> a cause with few values.
# First match wins; anything else is `other`.
_CAUSES = (
    ("agent looped", "looped"),
    ("agent crashed", "crashed"),
    ("agent stalled", "stalled"),
    ("agent was killed", "killed"),
    ("agent process is gone", "process_gone"),
    ("fresh-context starts used up", "fresh_starts_used_up"),
    ("could not start the agent again", "start_failed"),
    ("sandbox stopped answering", "sandbox_unresponsive"),
    ("sandbox was paused from outside", "paused_from_outside"),
    ("sandbox paused at its lease end", "lease_end"),
    ("sandbox time limit reached", "time_limit"),
    ("sandbox stopped", "sandbox_stopped"),
    ("sandbox disappeared", "sandbox_gone"),
    ("host lost", "host_lost"),
    ("resumed after the budget was extended", "budget_extended"),
    ("daily spending window reopened", "daily_window"),
)


# Every value `restart_cause` gives (the worker starts each counter at 0: overnight.worker.fleet).
RESTART_CAUSES = tuple(sorted({cause for _, cause in _CAUSES} | {"sandbox_ended_early", "other"}))
LEASE_OUTCOMES = ("extended", "refused", "failed")
WAKE_OUTCOMES = ("woken", "refused", "failed")


def restart_cause(reason: str) -> str:
    """The `cause` attribute of a restart, from its reason text."""
    text = reason.lower()
    for prefix, cause in _CAUSES:
        if text.startswith(prefix):
            return cause
    if text.startswith("sandbox ") and "ended before the agent started" in text:
        return "sandbox_ended_early"
    return "other"


class RunMetrics:
    """What one run has counted so far (rebuilt by replay, so never counted twice)."""

    def __init__(self) -> None:
        self._state: str | None = None
        self._restarts = 0
        # Counted so far, by kind: the sandboxes' and the model's (the agent's report).
        self._spend_micros = {"sandbox": 0, "model": 0}
        self._started = False
        self._refused = 0

    def record(self, status: RunStatus) -> None:
        if not self._started:
            self._started = True
            if workflow.info().continued_run_id is not None:
                # Continued as new: the run before counted all this already.
                self._state = status.state
                self._restarts = len(status.restarts)
                self._spend_micros = _spend_by_kind(status)
                self._refused = sum(status.egress_refused.values())
                return
        meter = workflow.metric_meter()
        if status.state != self._state:
            self._state = status.state
            counter = meter.create_counter(
                names.RUN_TRANSITIONS.name, names.RUN_TRANSITIONS.description
            )
            counter.add(1, {"state": status.state})
        if len(status.restarts) > self._restarts:
            counter = meter.create_counter(names.RESTARTS.name, names.RESTARTS.description)
            for record in status.restarts[self._restarts :]:
                # Counted against the budget or not (a resume after an extension is not).
                cause = restart_cause(record.reason)
                counter.add(1, {"cause": cause, "counted": counted(cause)})
            self._restarts = len(status.restarts)
        refused = sum(status.egress_refused.values())
        if refused > self._refused:
            blocked = meter.create_counter(
                names.EGRESS_REFUSED.name, names.EGRESS_REFUSED.description
            )
            blocked.add(refused - self._refused)
            self._refused = refused
        for kind, spent in _spend_by_kind(status).items():
            if spent > self._spend_micros[kind]:
                # Estimates may fall when the provider's figure comes in: count only growth.
                spend = meter.create_counter(names.SPEND.name, names.SPEND.description, "microUSD")
                spend.add(spent - self._spend_micros[kind], {"kind": kind})
                self._spend_micros[kind] = spent


def _spend_by_kind(status: RunStatus) -> dict[str, int]:
    """The run's spend in micro-dollars: its sandboxes' and the model spend its agent reported
    (`spend_usd` holds both)."""
    model = _micros(status.spend_model_usd)
    return {"sandbox": max(0, _micros(status.spend_usd) - model), "model": model}


_UNCOUNTED = ("budget_extended", "daily_window")


def _micros(usd: float) -> int:
    return round(usd * 1_000_000)


def counted(cause: str) -> str:
    """Whether a restart of this cause counts against the budget (`true`/`false`)."""
    return "false" if cause in _UNCOUNTED else "true"


def lease_extension(outcome: str) -> None:
    """A lease extension was asked for: `extended`, `refused` (daily limit) or `failed`."""
    _count(names.LEASE_EXTENSIONS, {"outcome": outcome})


def lease_end_wake(outcome: str) -> None:
    """A sandbox paused at its lease end: `woken`, `refused` (daily limit) or `failed`."""
    _count(names.LEASE_END_WAKES, {"outcome": outcome})


def _count(metric: names.Metric, attributes: dict[str, str]) -> None:
    counter = workflow.metric_meter().create_counter(metric.name, metric.description)
    counter.add(1, attributes)
