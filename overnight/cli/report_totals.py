"""`overnight report`'s sums, pure: what each run of a period says (its result, or what
visibility knows of it) folded into runs by outcome, restarts by cause, spend and the safety
net's share. Results are read as plain JSON documents, field by field, so results written by
older or newer versions of overnight count as far as they go (a missing figure is unknown, not
zero, and the report says how many runs had one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

_SINCE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str) -> timedelta:
    """`7d`, `36h`, `90m`, `2w`: how far back the report looks. ValueError otherwise."""
    found = _SINCE.match(text)
    if not found:
        raise ValueError(f"--since {text!r}: give a number and m, h, d or w (e.g. 7d, 36h)")
    span = timedelta(**{_UNITS[found.group(2)]: float(found.group(1))})
    if span <= timedelta(0):
        raise ValueError(f"--since {text!r}: must be more than zero")
    return span


@dataclass
class RunFacts:
    """One run as the report counts it (None: not known for this run)."""

    run_id: str
    outcome: str
    restarts: int | None = None
    by_cause: dict[str, int] = field(default_factory=dict)
    sandbox_usd: float | None = None
    model_usd: float | None = None
    safety_net_usd: float | None = None
    # Connections its sandboxes' network refused (None: a run begun before they were kept).
    blocked: int | None = None
    # Its figures are visibility's alone: no worker answered its status (or its result could
    # not be read), so its restarts are counted without their causes.
    unread: bool = False


# The causes a report names for restarts whose own cause it cannot read, and the catch-all
# cause, each with what it means (`report_text` prints the meaning of each one it counts).
UNREAD = "unread"
NOT_KEPT = "not_kept"
NOT_RESTARTED = "not_restarted"
EXPLAINED_CAUSES = {
    UNREAD: "runs only visibility counted: a run still going or failed whose worker did "
    "not answer (start it, e.g. `overnight dev`, and report again), or one terminated",
    NOT_KEPT: "runs begun before overnight kept restart causes",
    NOT_RESTARTED: "the run ended, or waits for a person, before the new sandbox ran",
    # A cause of its own (workflows.pure.safety_net.cause_of), the one whose name says least.
    "other": "a reason none of the named causes covers, e.g. a rewind a person asked for",
}


class Report(BaseModel):
    since: datetime
    until: datetime
    runs: int = 0
    by_outcome: dict[str, int] = Field(default_factory=dict)
    restarts: int = 0
    restarts_by_cause: dict[str, int] = Field(default_factory=dict)
    sandbox_usd: float = 0
    model_usd: float = 0
    safety_net_usd: float = 0
    # The safety net's part of the sandbox cost of the runs that have both figures.
    safety_net_share: float | None = None
    # How many runs each figure is known for (the rest: older runs, failed runs, no worker).
    runs_with_spend: int = 0
    runs_with_model_spend: int = 0
    runs_with_safety_net: int = 0
    # Connections the runs' sandboxes' networks refused, and in how many runs.
    blocked: int = 0
    runs_blocked: int = 0


def facts_from_result(run_id: str, result: dict[str, Any]) -> RunFacts:
    """A `RunResult` (or a `RunStatus`, for a run still going) as a JSON document."""
    outcome = result.get("outcome") or result.get("state") or "unknown"
    net = result.get("safety_net") if isinstance(result.get("safety_net"), dict) else None
    restarts = _int(result.get("restarts"))
    if restarts is None and isinstance(result.get("restarts"), list):
        restarts = _int(result.get("restarts_used"))
    by_cause: dict[str, int] = {}
    if net is not None:
        by_cause = {str(k): n for k, v in (net.get("by_cause") or {}).items() if (n := _int(v))}
    if restarts and restarts > sum(by_cause.values()) and isinstance(result.get("restarts"), list):
        # A status lists its restarts: those the safety net has not counted yet (noticed,
        # their new sandbox not running) are named by their own reasons.
        _name_from_records(by_cause, restarts, result["restarts"])
    model = model_spend_of(result)
    # The safety net's own sandbox figure; else the total less the model spend in it.
    sandbox = None
    if net is not None:
        sandbox = _number(net.get("sandbox_usd"))
    if sandbox is None:
        total = _number(result.get("spend_usd"))
        sandbox = None if total is None else max(0.0, total - (model or 0.0))
    return RunFacts(
        run_id=run_id,
        outcome=str(outcome),
        restarts=restarts,
        by_cause=by_cause,
        sandbox_usd=sandbox,
        model_usd=model,
        safety_net_usd=None if net is None else _number(net.get("usd")),
        blocked=_blocked(result.get("egress_refused")),
    )


def _name_from_records(by_cause: dict[str, int], restarts: int, records: list[Any]) -> None:
    from workflows.pure.safety_net import cause_of

    missing = restarts - sum(by_cause.values())
    reasons = [str(r.get("reason") or "") for r in records if isinstance(r, dict)]
    for reason in reasons[-missing:] if missing <= len(reasons) else reasons:
        cause = cause_of(reason)
        by_cause[cause] = by_cause.get(cause, 0) + 1


def _blocked(counts: Any) -> int | None:
    if not isinstance(counts, dict):
        return None
    return sum(n for value in counts.values() if (n := _int(value)))


def model_spend_of(document: dict[str, Any]) -> float | None:
    """The model spend a result or status reports (`spend_model_usd`); None from a version of
    overnight before the agent could report it."""
    return _first_number(document, ("spend_model_usd",))


def summarize(facts: list[RunFacts], since: datetime, until: datetime) -> Report:
    report = Report(since=since, until=until, runs=len(facts))
    with_both_net = with_both_sandbox = 0.0
    for run in facts:
        report.by_outcome[run.outcome] = report.by_outcome.get(run.outcome, 0) + 1
        report.restarts += run.restarts or 0
        caused = sum(run.by_cause.values())
        for cause, n in run.by_cause.items():
            report.restarts_by_cause[cause] = report.restarts_by_cause.get(cause, 0) + n
        if run.restarts and run.restarts > caused:
            why = _why_uncaused(run)
            report.restarts_by_cause[why] = (
                report.restarts_by_cause.get(why, 0) + run.restarts - caused
            )
        if run.sandbox_usd is not None:
            report.sandbox_usd += run.sandbox_usd
            report.runs_with_spend += 1
        if run.model_usd:
            report.model_usd += run.model_usd
            report.runs_with_model_spend += 1
        if run.blocked:
            report.blocked += run.blocked
            report.runs_blocked += 1
        if run.safety_net_usd is not None:
            report.safety_net_usd += run.safety_net_usd
            report.runs_with_safety_net += 1
            if run.sandbox_usd is not None:
                with_both_net += run.safety_net_usd
                with_both_sandbox += run.sandbox_usd
    report.by_outcome = dict(sorted(report.by_outcome.items()))
    report.restarts_by_cause = dict(sorted(report.restarts_by_cause.items()))
    report.sandbox_usd = round(report.sandbox_usd, 6)
    report.model_usd = round(report.model_usd, 6)
    report.safety_net_usd = round(report.safety_net_usd, 6)
    if with_both_sandbox > 0:
        report.safety_net_share = round(with_both_net / with_both_sandbox, 4)
    return report


def _why_uncaused(run: RunFacts) -> str:
    """Why some of a run's restarts have no cause of their own (EXPLAINED_CAUSES says each)."""
    if run.unread:
        return UNREAD
    if run.safety_net_usd is None:
        return NOT_KEPT
    return NOT_RESTARTED


def _first_number(document: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = _number(document.get(key))
        if value is not None:
            return value
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return max(0, value)
