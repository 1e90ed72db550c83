"""What the run page shows, read from Temporal: the run's `status` (the query; a worker
answers it, for an ended run too, by replaying it), its history's marks for the timeline, its
result (a finished run's final checkpoint notes), its spec's repository (for the kept
workspace's diff). Pure helpers beside the reads decide what is shown: the checkpoint's notes,
the outputs, the pull request link (`safe_pull_request`), the kept steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from overnight.cli import client as api
from overnight.console.run_events import history_marks
from overnight.console.timeline import Mark
from overnight.core.checkpoint_text import parse
from overnight.core.errors import OvernightError, RunNotFound
from overnight.core.models import RunResult, RunStatus
from overnight.core.workspace_spec import KeptWorkspace, latest_pushed
from workflows.messages import CHECKPOINT_QUERY

MAX_NOTES = 30
ENDED_QUERY_TIMEOUT = timedelta(seconds=5)
MAX_URL_CHARS = 2048
# A kept step asked for in the page's address (`?step=`): ASCII digits only (`str.isdigit`
# takes `²`, which `int` refuses), and few of them.
_STEP = re.compile(r"[0-9]{1,9}")


@dataclass
class RunData:
    run_id: str
    open: bool
    workflow_status: str
    closed_at: datetime | None
    status: RunStatus | None
    # Why the status could not be read (no worker answered, ...).
    status_problem: str | None = None
    marks: list[Mark] = field(default_factory=list)
    result: RunResult | None = None
    # The last good checkpoint's text, from the run's `checkpoint` query (None: none yet, or
    # a worker that does not answer it).
    checkpoint: str | None = None


async def load(client: Client, run_id: str, previous: RunData | None = None) -> RunData:
    """The run's data; `RunNotFound` when the namespace has no such run. With `previous`
    (a page's stream asking again), its history is read again only when the status shows
    something the history marks may have changed with."""
    handle = client.get_workflow_handle(run_id)
    try:
        described = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RunNotFound(run_id) from None
        raise
    running = described.status == WorkflowExecutionStatus.RUNNING
    name = described.status.name.lower() if described.status is not None else "unknown"
    data = RunData(run_id, running, name, described.close_time, None)
    try:
        if running:
            data.status = await api.get_status(client, run_id)
        else:
            # An ended run is answered by a worker replaying it: none may be up to do so.
            data.status = await handle.query(
                "status", result_type=RunStatus, rpc_timeout=ENDED_QUERY_TIMEOUT
            )
    except (OvernightError, RPCError, WorkflowQueryFailedError) as err:
        data.status_problem = getattr(err, "message", None) or str(err) or "the run did not answer"
    if data.status is not None and data.result is None:
        data.checkpoint = await _checkpoint(client, run_id, data.status, previous)
    if previous is not None and marks_key(previous) == marks_key(data):
        data.marks = previous.marks
    else:
        data.marks = await history_marks(client, run_id)
    if previous is not None and previous.result is not None:
        data.result = previous.result
    elif described.status == WorkflowExecutionStatus.COMPLETED:
        try:
            data.result = await client.get_workflow_handle(run_id, result_type=RunResult).result()
        except Exception:  # an unreadable result leaves the notes to the status
            data.result = None
    return data


async def _checkpoint(
    client: Client, run_id: str, status: RunStatus, previous: RunData | None
) -> str | None:
    """The checkpoint's text, asked again only when the status shows a new one."""
    before = previous.status if previous is not None else None
    if previous is not None and before is not None and _same_checkpoint(before, status):
        return previous.checkpoint
    try:
        text: str | None = await client.get_workflow_handle(run_id).query(
            CHECKPOINT_QUERY, result_type=str, rpc_timeout=ENDED_QUERY_TIMEOUT
        )
    except (RPCError, WorkflowQueryFailedError):
        return None  # a worker of before the query: the status' last note is shown
    return text


def _same_checkpoint(before: RunStatus, now: RunStatus) -> bool:
    return (before.checkpoint_bytes, before.checkpoint_summary) == (
        now.checkpoint_bytes,
        now.checkpoint_summary,
    )


def marks_key(data: RunData) -> tuple[Any, ...]:
    """What changes when the history gains a mark: a pause or wake (a question, a wait, a
    lease end, a restart), a done check, a person's act."""
    status = data.status
    if status is None:
        return (data.open, data.workflow_status)
    talk = status.talk
    held = (talk.question, talk.waiting_until) if talk is not None else None
    return (
        data.open,
        status.state,
        status.attempt,
        len(status.restarts),
        held,
        len(status.done_checks),
        status.done_checks_used,
        status.budget,
        status.lease_resumes,
        status.workspace.rewinds if status.workspace is not None else 0,
    )


async def spec_repo(client: Client, run_id: str) -> str:
    from overnight.worker.run_history import run_spec

    return (await run_spec(client, run_id)).repo


def safe_pull_request(url: str | None) -> str | None:
    """The pull request's address when it is one the page may link: an https URL with a host
    and no credentials (the worker read it from GitHub's answer; the run page links nothing
    else)."""
    if not url or len(url) > MAX_URL_CHARS or any(c.isspace() or ord(c) < 32 for c in url):
        return None
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname or parts.username or parts.password:
        return None
    return url


def shown_state(data: RunData) -> str:
    """The run's state as the page names it: its status's; when that cannot be read (an ended
    run that no worker replayed in time), the outcome its result holds, which needs no
    worker, else Temporal's word for how it closed."""
    if data.status is not None:
        return data.status.state
    if data.result is not None:
        return data.result.outcome
    return data.workflow_status


def checkpoint_notes(data: RunData) -> list[str]:
    """The checkpoint's notes (the last `MAX_NOTES`): from a finished run's result, else from
    the `checkpoint` query; the status' last note when neither has any. Text as the agent
    wrote it (the template escapes it)."""
    result = data.result
    parsed: Any = None
    if result is not None:
        parsed = result.checkpoint_json
    elif data.checkpoint is not None:
        is_json, parsed = parse(data.checkpoint)
        parsed = parsed if is_json else None
    if isinstance(parsed, dict):
        notes = parsed.get("notes")
        if isinstance(notes, list) and notes:
            return [_text(note) for note in notes[-MAX_NOTES:]]
    summary = data.status.checkpoint_summary if data.status is not None else None
    if summary is not None and summary.last_note:
        return [summary.last_note]
    return []


def next_step(data: RunData) -> str | None:
    summary = data.status.checkpoint_summary if data.status is not None else None
    return summary.next if summary is not None else None


def kept_steps(status: RunStatus | None) -> list[KeptWorkspace]:
    if status is None or status.workspace is None:
        return []
    return list(status.workspace.kept)


def chosen_step(status: RunStatus | None, asked: str | None) -> KeptWorkspace | None:
    """The kept step whose diff the page shows: the one asked for, else the latest pushed."""
    kept = kept_steps(status)
    if asked is not None and _STEP.fullmatch(asked):
        found = next((k for k in kept if k.number == int(asked)), None)
        if found is not None and found.outcome == "pushed" and found.commit is not None:
            return found
        return None
    return latest_pushed(kept)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def now() -> datetime:
    return datetime.now(UTC)
