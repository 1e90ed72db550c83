"""The console's one reader of the runs list: a background poller shared by every browser.

Every `every` seconds it lists the open runs and the runs closed in the last `closed_days`
(`ListWorkflowExecutions`, `page_size` a page, at most `cap` runs in all, open ones first),
and turns each entry into a `RunRow` from its search attributes and row memo
(overnight/console/rows.py): one or two requests a poll however many browsers are open, and
none per run. Each page reads the latest snapshot (`rows`), filtered in memory; each SSE
stream waits on `changes()`, which yields the run ids whose row changed since it last looked.
`search` is the one-off read for what lies outside the snapshot (a date range, the night):
its filters go into the visibility query where the namespace can answer them.

`requests` counts every Temporal request it made (the benchmark reads it). A failed poll
keeps the last snapshot and says why in `error`; the next poll tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Protocol

from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus
from temporalio.service import RPCError

from overnight.console.rows import RunRow, row_of
from overnight.console.runs_query import Filters, closed_runs_since, open_runs, runs_query
from overnight.core.constants import SEARCH_ATTRIBUTE_TYPES

log = logging.getLogger(__name__)

EVERY_SECONDS = 2.0
PAGE_SIZE = 1000
CAP = 5000
CLOSED_DAYS = 7.0


class KeepsRows(Protocol):
    def keeps(self, row: Any) -> bool: ...


@dataclass(frozen=True)
class RunsChange:
    """What changed between two looks: rows changed or new, and rows gone from the list."""

    changed: frozenset[str]
    removed: frozenset[str]
    version: int


@dataclass(eq=False)
class _Listener:
    changed: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    news: asyncio.Event = field(default_factory=asyncio.Event)


class ChangeFeed:
    """One reader's changes (`RunsSource.changes`): listening from the moment it is made."""

    def __init__(self, source: RunsSource) -> None:
        self._source = source
        self._listener = _Listener()
        source._listeners.add(self._listener)

    def __aiter__(self) -> ChangeFeed:
        return self

    async def __anext__(self) -> RunsChange:
        listener = self._listener
        if listener not in self._source._listeners:
            raise StopAsyncIteration
        await listener.news.wait()
        listener.news.clear()
        change = RunsChange(
            frozenset(listener.changed), frozenset(listener.removed), self._source.version
        )
        listener.changed.clear()
        listener.removed.clear()
        return change

    async def aclose(self) -> None:
        self._source._listeners.discard(self._listener)

    async def __aenter__(self) -> ChangeFeed:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class RunsSource:
    """See the module docstring. Use as `async with RunsSource(client) as runs:`."""

    def __init__(
        self,
        client: Client,
        *,
        every: float = EVERY_SECONDS,
        page_size: int = PAGE_SIZE,
        cap: int = CAP,
        closed_days: float = CLOSED_DAYS,
        where: str = "",
    ) -> None:
        self._client = client
        self.every = every
        self.page_size = page_size
        self.cap = cap
        self.closed_days = closed_days
        self.where = where
        self.requests = 0  # Temporal requests made, all told
        self.polls = 0
        self.version = 0
        self.polled_at: datetime | None = None
        self.error: str | None = None
        self._rows: dict[str, RunRow] = {}
        self._seen: dict[str, tuple[bytes, RunRow]] = {}  # run id -> (what it was made of, row)
        self._present: list[str] | None = None
        self._listeners: set[_Listener] = set()
        self._first = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ---- lifetime ---------------------------------------------------------------------------

    async def __aenter__(self) -> RunsSource:
        self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="overnight-console-runs")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def ready(self, timeout: float | None = None) -> None:
        """Wait for the first poll (done or failed)."""
        await asyncio.wait_for(self._first.wait(), timeout)

    # ---- reading ----------------------------------------------------------------------------

    def rows(self, filters: KeepsRows | None = None) -> list[RunRow]:
        """The latest snapshot's rows (newest start first), those `filters` keeps."""
        rows = sorted(self._rows.values(), key=lambda row: row.started_at, reverse=True)
        return rows if filters is None else [row for row in rows if filters.keeps(row)]

    def row(self, run_id: str) -> RunRow | None:
        return self._rows.get(run_id)

    def changes(self) -> ChangeFeed:
        """Each change of the snapshot from now on (changes that come while the reader is busy
        are merged into the next one it gets). Close it (`aclose`) when the reader goes."""
        return ChangeFeed(self)

    async def search(
        self, filters: Filters | None = None, *, also: str = "", limit: int = 10_000
    ) -> list[RunRow]:
        """A one-off read of every run the filters keep (open or closed, any age), the filters
        in the visibility query where they can be (overnight/console/runs_query.py), and the
        query `also` besides."""
        query = runs_query(filters, await self.present(), self.where)
        if also:
            query += f" AND ({also})"
        executions = await self._list(query, limit)
        rows = [await row_of(execution) for execution in _latest(executions)]
        keeps = getattr(filters, "keeps", None)
        return [row for row in rows if keeps is None or keeps(row)]

    async def present(self) -> list[str]:
        """overnight's search attributes the namespace has (asked once)."""
        if self._present is None:
            self.requests += 1
            try:
                answer = await self._client.operator_service.list_search_attributes(
                    ListSearchAttributesRequest(namespace=self._client.namespace)
                )
            except RPCError:  # may not list them: filter in memory only
                self._present = []
            else:
                names = set(answer.custom_attributes)
                self._present = [name for name in SEARCH_ATTRIBUTE_TYPES if name in names]
        return self._present

    # ---- polling ----------------------------------------------------------------------------

    async def poll(self) -> RunsChange:
        """Look once now: the snapshot brought up to date, and what changed."""
        since = datetime.now(UTC) - timedelta(days=self.closed_days)
        running = await self._list(open_runs(self.where), self.cap)
        closed: list[WorkflowExecution] = []
        if len(running) < self.cap:
            closed = await self._list(closed_runs_since(since, self.where), self.cap - len(running))
        rows: dict[str, RunRow] = {}
        for execution in _latest([*running, *closed]):
            rows[execution.id] = await self._row(execution)
        changed = {run_id for run_id, row in rows.items() if self._rows.get(run_id) != row}
        removed = set(self._rows) - set(rows)
        self._seen = {run_id: self._seen[run_id] for run_id in rows if run_id in self._seen}
        self._rows = rows
        self.polls += 1
        self.polled_at = datetime.now(UTC)
        if changed or removed:
            self.version += 1
            for listener in self._listeners:
                listener.changed |= changed
                listener.removed |= removed
                listener.changed -= removed
                listener.news.set()
        return RunsChange(frozenset(changed), frozenset(removed), self.version)

    async def _loop(self) -> None:
        while True:
            try:
                await self.poll()
                self.error = None
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the server away a moment: keep the last snapshot
                self.error = str(err) or type(err).__name__
                log.warning("runs list poll failed: %s", self.error)
            self._first.set()
            await asyncio.sleep(self.every)

    async def _row(self, execution: WorkflowExecution) -> RunRow:
        """The row, decoded again only when its memo, attributes or ending changed."""
        raw = execution.raw_info
        made_of = b"|".join(
            (
                raw.memo.SerializeToString(deterministic=True),
                raw.search_attributes.SerializeToString(deterministic=True),
                raw.close_time.SerializeToString(deterministic=True),
                bytes([raw.status]),
            )
        )
        kept = self._seen.get(execution.id)
        if kept is not None and kept[0] == made_of:
            return kept[1]
        row = await row_of(execution)
        self._seen[execution.id] = (made_of, row)
        return row

    async def _list(self, query: str, limit: int) -> list[WorkflowExecution]:
        """Up to `limit` executions of `query`, a page a request (each counted)."""
        found: list[WorkflowExecution] = []
        if limit <= 0:
            return found
        pages = self._client.list_workflows(query, page_size=min(self.page_size, limit))
        while len(found) < limit:
            self.requests += 1
            await pages.fetch_next_page()
            found += list(pages.current_page or [])
            if pages.next_page_token is None:
                break
        return found[:limit]


def _latest(executions: Iterable[WorkflowExecution]) -> list[WorkflowExecution]:
    """One entry a run: the first listed (open before closed), never a continued-as-new one."""
    seen: set[str] = set()
    kept = []
    for execution in executions:
        if execution.status == WorkflowExecutionStatus.CONTINUED_AS_NEW or execution.id in seen:
            continue
        seen.add(execution.id)
        kept.append(execution)
    return kept
