"""`overnight reap`'s part for the gateway's books on this host (activities/gateway/books.py):
a run's ledger and stats once its run is closed or gone, a sandbox's refusals once the
sandbox neither runs nor waits paused. The gateway appended to them for as long as they were
needed and never deleted them: a host that ran runs for months kept a file per run and
sandbox."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.client import WorkflowExecutionStatus

from activities.gateway.books import booked_runs, reap_books
from overnight.home import overnight_home

if TYPE_CHECKING:
    from overnight.worker.reaping import ReapedSandbox, RunBook


async def reap_gateway_books(runs: RunBook, home: Path | None = None) -> list[ReapedSandbox]:
    """Delete the gateway's books no run needs any more; one entry per run or sandbox."""
    from overnight.worker.reaping import ReapedSandbox

    home = home or overnight_home()
    statuses = {run_id: await runs.status(run_id) for run_id in booked_runs(home)}
    running = {run_id for run_id, s in statuses.items() if s == WorkflowExecutionStatus.RUNNING}
    found = await asyncio.to_thread(reap_books, home, running.__contains__)
    return [
        ReapedSandbox(
            provider="local",
            sandbox_id=book.owner,
            run_id="",
            was="kept",
            stopped=True,
            kind=f"gateway {book.kind}",
            why=(
                ("its run is gone" if statuses.get(book.owner) is None else "its run is closed")
                if book.kind == "spend"
                else "its sandbox no longer runs"
            ),
            freed_bytes=book.freed_bytes,
        )
        for book in found
    ]
