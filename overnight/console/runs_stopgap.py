"""A stand-in for the console's `RunsSource` until it lands: the runs list read with the CLI's
`list_runs`, and the `status` query of each open run (a few at a time). Costs one query per
open run per page; the shared source reads one visibility list for every browser instead.
To be dropped once `overnight/console/runs_source.py` is in.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime

from temporalio.client import Client

from overnight.cli import client as api
from overnight.models import RunStatus

QUERIES_AT_ONCE = 8
# A closed workflow's Temporal status, as the list shows it when the run said nothing more.
CLOSED = {"completed": "finished", "canceled": "cancelled", "timed_out": "timed_out"}


@dataclass
class StopgapRow:
    run_id: str
    state: str
    closed: bool
    started_at: datetime
    closed_at: datetime | None = None
    owner: str = ""
    labels: list[str] = field(default_factory=list)
    agent: str = ""
    attempt: int = 0
    restarts: int = 0
    max_restarts: int | None = None
    next_step: str | None = None
    spend_usd: float = 0
    max_spend_usd: float | None = None
    hours_used: float = 0
    max_hours: float | None = None
    last_progress_at: datetime | None = None
    pull_request_url: str | None = None
    attention: str | None = None
    question: str | None = None
    choices: list[str] = field(default_factory=list)


async def read_rows(client: Client, limit: int = 1000) -> list[StopgapRow]:
    summaries = await api.list_runs(client, limit=limit)
    gate = asyncio.Semaphore(QUERIES_AT_ONCE)

    async def row(summary: api.RunSummary) -> StopgapRow:
        closed = summary.workflow_status != "running"
        state = summary.state or CLOSED.get(summary.workflow_status, summary.workflow_status)
        if closed and summary.workflow_status != "completed":
            state = CLOSED.get(summary.workflow_status, summary.workflow_status)
        made = StopgapRow(
            run_id=summary.run_id,
            state=state,
            closed=closed,
            started_at=summary.started_at,
            closed_at=summary.closed_at,
            restarts=summary.restarts or 0,
            last_progress_at=summary.last_progress_at,
        )
        if not closed:
            async with gate:
                try:
                    status = await api.get_status(client, summary.run_id)
                except Exception:  # a run without a worker: the list still shows it
                    return made
            _fill(made, status)
        return made

    return list(await asyncio.gather(*(row(s) for s in summaries)))


def _fill(row: StopgapRow, status: RunStatus) -> None:
    row.state = status.state
    row.attempt = status.attempt
    row.restarts = status.restarts_used
    row.max_restarts = status.budget.max_restarts
    row.spend_usd = status.spend_usd
    row.max_spend_usd = status.budget.max_spend_usd
    row.hours_used = status.hours_used
    row.max_hours = status.budget.max_hours
    row.last_progress_at = status.last_progress_at
    row.attention = status.attention_reason
    summary = status.checkpoint_summary
    row.next_step = summary.next if summary else None
    if status.talk is not None and status.talk.question is not None:
        row.question = status.talk.question
        row.choices = list(status.talk.choices)
    url = status.pull_request_url
    row.pull_request_url = url if url and url.startswith("https://") else None
