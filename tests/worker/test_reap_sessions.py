"""`overnight reap` deletes the session stores of coding agents' runs that are closed or gone
($OVERNIGHT_HOME/sessions/<run_id>/, the adapter's copies of a CLI's session), and keeps those
of runs still going; a folder its agent made unreadable goes too, and what it freed is the
blocks it held. (A store on an image of its own: tests/providers/test_local_run_store.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from temporalio.client import WorkflowExecutionStatus

from activities.providers.local.disk import tree_bytes
from overnight.cli.render import reaped_text
from overnight.worker.reaping import reap_sessions
from overnight.worker.run_book import RunBook


class Book:
    def __init__(self, statuses: dict[str, WorkflowExecutionStatus | None]) -> None:
        self.statuses = statuses

    async def status(self, run_id: str) -> WorkflowExecutionStatus | None:
        return self.statuses.get(run_id)


async def test_closed_and_gone_runs_lose_their_session_stores(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    for run in ("going", "done", "gone"):
        (root / run / "projects").mkdir(parents=True)
        (root / run / "projects" / "s.jsonl").write_text("x" * 1000)
    (root / "done" / "projects").chmod(0)
    held = {run: tree_bytes(root / run) for run in ("done", "gone")}  # blocks, folders too
    book = Book(
        {"going": WorkflowExecutionStatus.RUNNING, "done": WorkflowExecutionStatus.COMPLETED}
    )
    reaped = await reap_sessions(cast(RunBook, book), tmp_path)
    assert [(e.sandbox_id, e.stopped, e.why, e.freed_bytes) for e in reaped] == [
        ("done", True, "its run is closed", held["done"]),
        ("gone", True, "its run is gone", held["gone"]),
    ]
    assert sorted(p.name for p in root.iterdir()) == ["going"]
    assert "local session done: deleted: its run is closed; freed" in reaped_text(reaped)
    assert await reap_sessions(cast(RunBook, book), tmp_path / "nowhere") == []
