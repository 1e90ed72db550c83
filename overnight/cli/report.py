"""`overnight report [--since 7d] [--json]`: what the runs of a period came to, from Temporal
visibility: runs by outcome, restarts by cause, sandbox and model spend, and the safety net's
share of the sandbox cost.

The period's runs are the `AgentRun` executions that closed since then or are still going
(each run's whole figures count, not a share pro rata). A finished or cancelled run's figures
come from its result (the close event only, not its history); a run still going is asked its
`status` (needs a worker; if none answers within `QUERY_TIMEOUT` it counts without figures);
so is a failed one, which has no result (a worker replays it to answer; without one it counts
its restarts from the `OvernightRestarts` search attribute, without money). At most
`CONCURRENCY` of these reads are in flight at once.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowHistoryEventFilterType,
)
from temporalio.common import SearchAttributeKey

from overnight.cli.commands import Command
from overnight.cli.connecting import connect
from overnight.cli.help_texts import JSON_HELP
from overnight.cli.report_totals import (
    EXPLAINED_CAUSES,
    Report,
    RunFacts,
    facts_from_result,
    parse_since,
    summarize,
)
from overnight.core.constants import SA_RESTARTS, WORKFLOW_TYPE
from overnight.core.errors import OvernightError

CONCURRENCY = 8
QUERY_TIMEOUT = timedelta(seconds=5)
MAX_RUNS = 10_000
_RESTARTS = SearchAttributeKey.for_int(SA_RESTARTS)
# How a Failed run's ApplicationError type reads as an outcome.
_FAILURE_OUTCOMES = {
    "OutOfBudget": "out_of_budget",
    "InvalidSpec": "invalid_spec",
    "SpecRefused": "spec_refused",
}


class ReportInputError(OvernightError):
    bad_input = True


def _arguments(report: argparse.ArgumentParser) -> None:
    report.add_argument("--since", default="7d", help="how far back: 7d, 36h, 90m, 2w")
    report.add_argument(
        "--where", help="narrow it by a visibility query, e.g. \"TaskQueue = 'nightly'\""
    )
    report.add_argument("--json", action="store_true", help=JSON_HELP)


async def run(
    args: argparse.Namespace, connect: Callable[[argparse.Namespace], Awaitable[Client]]
) -> int:
    try:
        span = parse_since(args.since)
    except ValueError as err:  # it names the forms it takes
        raise ReportInputError(str(err)) from None
    client = await connect(args)
    report = await collect(client, span, where=args.where)
    print(report.model_dump_json(indent=2) if args.json else report_text(report))
    return 0


async def collect(
    client: Client, span: timedelta, *, where: str | None = None, now: datetime | None = None
) -> Report:
    until = now or datetime.now(UTC)
    since = until - span
    query = (
        f"WorkflowType = '{WORKFLOW_TYPE}' AND "
        f"(CloseTime >= '{since.isoformat()}' OR ExecutionStatus = 'Running')"
    )
    if where:
        query += f" AND ({where})"
    gate = asyncio.Semaphore(CONCURRENCY)

    async def read(execution: WorkflowExecution) -> RunFacts:
        async with gate:
            return await facts_of(client, execution)

    executions = [
        execution
        async for execution in client.list_workflows(query, limit=MAX_RUNS)
        if execution.status != WorkflowExecutionStatus.CONTINUED_AS_NEW
    ]
    facts = await asyncio.gather(*(read(execution) for execution in executions))
    return summarize(list(facts), since, until)


async def facts_of(client: Client, execution: WorkflowExecution) -> RunFacts:
    """One run's figures, from its result, its status, or visibility alone."""
    restarts = execution.typed_search_attributes.get(_RESTARTS)
    status = execution.status
    handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
    if status == WorkflowExecutionStatus.RUNNING:
        return await _facts_asked(handle, execution.id, "running", restarts)
    async for event in handle.fetch_history_events(
        event_filter_type=WorkflowHistoryEventFilterType.CLOSE_EVENT
    ):
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            payloads = event.workflow_execution_completed_event_attributes.result.payloads
            try:
                [document] = await client.data_converter.decode(list(payloads), [dict])
            except Exception:  # a result this version cannot read still counts as a run
                return RunFacts(
                    run_id=execution.id, outcome="finished", restarts=restarts, unread=True
                )
            return facts_from_result(execution.id, document)
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            failure = event.workflow_execution_failed_event_attributes.failure
            kind = failure.application_failure_info.type
            outcome = _FAILURE_OUTCOMES.get(kind, "failed")
            # A failed run has no result: its figures come from its last status (a worker
            # replays the closed run to answer), so the money it spent is counted too.
            return await _facts_asked(handle, execution.id, outcome, restarts)
    name = status.name.lower() if status is not None else "unknown"
    outcome = "cancelled" if name == "canceled" else name
    return RunFacts(run_id=execution.id, outcome=outcome, restarts=restarts, unread=True)


async def _facts_asked(
    handle: WorkflowHandle[Any, Any], run_id: str, outcome: str, restarts: int | None
) -> RunFacts:
    """A run's figures from its `status` query, counted under `outcome`."""
    try:
        document = await handle.query("status", result_type=dict, rpc_timeout=QUERY_TIMEOUT)
    except Exception:  # no worker answers, or an old worker: count it without figures
        return RunFacts(run_id=run_id, outcome=outcome, restarts=restarts, unread=True)
    facts = facts_from_result(run_id, document)
    facts.outcome = outcome
    return facts


def report_text(report: Report) -> str:
    span = f"{report.since:%Y-%m-%d %H:%M} to {report.until:%Y-%m-%d %H:%M} UTC"
    if not report.runs:
        return f"no runs from {span}"
    outcomes = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in report.by_outcome.items())
    causes = ", ".join(
        f"{n} {name.replace('_', ' ')}" for name, n in report.restarts_by_cause.items()
    )
    share = "-" if report.safety_net_share is None else f"{report.safety_net_share:.1%}"
    lines = [
        f"{report.runs} run(s) from {span}",
        f"  outcomes:     {outcomes}",
        f"  restarts:     {report.restarts}" + (f" ({causes})" if causes else ""),
        f"  sandboxes:    ${report.sandbox_usd:.4f} "
        f"({report.runs_with_spend} run(s) with a figure)",
        f"  model:        ${report.model_usd:.4f} reported "
        f"({report.runs_with_model_spend} run(s) reported any)",
        f"  safety net:   ${report.safety_net_usd:.4f}, {share} of the sandbox cost "
        f"({report.runs_with_safety_net} run(s) with a figure)",
    ]
    lines += [
        f"                {name.replace('_', ' ')}: {meaning}"
        for name, meaning in EXPLAINED_CAUSES.items()
        if name in report.restarts_by_cause
    ]
    if report.blocked:
        lines.append(
            f"  network:      {report.blocked} connection(s) refused by the runs' allow-lists "
            f"({report.runs_blocked} run(s); `overnight status RUN` names the hosts)"
        )
    return "\n".join(lines)


COMMANDS = (
    Command(
        "report",
        "what the runs of a period came to: outcomes, restarts, spend, safety net",
        _arguments,
        lambda args: run(args, connect),
    ),
)
