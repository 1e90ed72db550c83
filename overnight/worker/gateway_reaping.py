"""`overnight reap`'s part for the gateway's books on this host (activities/gateway/books.py):
a run's ledger and stats once its run is closed or gone, a sandbox's refusals once the
sandbox neither runs nor waits paused. The gateway appended to them for as long as they were
needed and never deleted them: a host that ran runs for months kept a file per run and
sandbox."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from temporalio.client import WorkflowExecutionStatus

from activities.gateway.books import ReapedBook, booked_runs, reap_books
from overnight.core.home import overnight_home


async def reap_gateway_books(
    status: Callable[[str], Awaitable[WorkflowExecutionStatus | None]], home: Path | None = None
) -> list[tuple[ReapedBook, str]]:
    """Delete the gateway's books no run needs any more (`status`: a run's in Temporal, None
    when it is gone); each with why."""
    home = home or overnight_home()
    statuses = {run_id: await status(run_id) for run_id in booked_runs(home)}
    running = {run_id for run_id, s in statuses.items() if s == WorkflowExecutionStatus.RUNNING}
    found = await asyncio.to_thread(reap_books, home, running.__contains__)
    return [(book, _why(book, statuses)) for book in found]


def _why(book: ReapedBook, statuses: dict[str, WorkflowExecutionStatus | None]) -> str:
    if book.kind != "spend":
        return "its sandbox no longer runs"
    return "its run is gone" if statuses.get(book.owner) is None else "its run is closed"
