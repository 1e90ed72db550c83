"""`overnight replay-check`: would this tree's workflow code replay the runs really in flight?

Before new worker code is rolled out, the histories of a namespace's open runs (and of runs
closed within `--since`, which a person may still reset or query) are downloaded and replayed
against the workflow code in this tree, as a worker of it would run them
(overnight.worker.registration: the same workflow classes, runner, data converter and
interceptors). A change that old histories would not replay without a `workflow.patched`
branch shows up here as the first run that diverges, before any worker meets it.

Histories are fetched a few at a time (`--concurrency`) and replayed as they arrive, so memory
holds at most about twice that many histories whatever the namespace's size.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecution, WorkflowHistory
from temporalio.service import RPCError, RPCStatusCode

from overnight.cli import render
from overnight.cli.commands import Command
from overnight.cli.connecting import connect
from overnight.cli.help_texts import JSON_HELP
from overnight.core.errors import OvernightError

Connect = Callable[[argparse.Namespace], Awaitable[Client]]

DEFAULT_SINCE = "2d"
DEFAULT_CONCURRENCY = 8
_SINCE = re.compile(r"^(\d+)\s*([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class ReplayCheckInputError(OvernightError):
    bad_input = True


class Divergence(BaseModel):
    """The first run whose history this tree's code does not replay."""

    workflow_id: str
    run_id: str
    workflow_type: str
    error_type: str
    error: str


class ReplayReport(BaseModel):
    namespace: str
    since: str
    replayed: int  # histories replayed without a failure
    by_type: dict[str, int]  # of those, how many of each workflow type
    skipped: int  # listed, but gone before their history could be read (retention)
    divergence: Divergence | None = None


def parse_since(text: str) -> timedelta:
    """`0` (open runs only), `90s`, `30m`, `12h`, `2d`."""
    cleaned = text.strip().lower()
    if cleaned == "0":
        return timedelta(0)
    found = _SINCE.match(cleaned)
    if found is None:
        raise ReplayCheckInputError(
            f"--since {text!r}: give a number and a unit, like 12h or 2d (0: open runs only)"
        )
    return timedelta(seconds=int(found.group(1)) * _UNIT_SECONDS[found.group(2)])


def history_query(workflow_types: Sequence[str], since: timedelta, now: datetime) -> str:
    """The visibility query for the runs to check: open ones, and those closed after
    `now - since`, of the given workflow types."""
    types = ", ".join(f"'{name}'" for name in workflow_types)
    which = "ExecutionStatus = 'Running'"
    if since > timedelta(0):
        closed_after = (now - since).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        which = f"({which} OR CloseTime > '{closed_after}')"
    return f"WorkflowType IN ({types}) AND {which}"


async def replay_check(
    client: Client,
    *,
    since: timedelta,
    now: datetime,
    concurrency: int = DEFAULT_CONCURRENCY,
    workflows: Sequence[type] | None = None,
) -> ReplayReport:
    """Replay every open run, and every run closed within `since`, of the registered workflow
    types in `client`'s namespace; stop at the first that diverges. `workflows` replaces the
    registered classes (their names must be the registered types')."""
    from overnight.worker.registration import registered_workflow_types, replayer_for

    query = history_query(registered_workflow_types(), since, now)
    replayer = replayer_for(client, workflows)
    kinds: Counter[str] = Counter()
    report = ReplayReport(
        namespace=client.namespace, since=_since_text(since), replayed=0, by_type={}, skipped=0
    )
    async with _fetched_histories(client, query, concurrency, report) as histories:
        async with replayer.workflow_replay_iterator(histories.stream()) as results:
            async for result in results:
                workflow_type = histories.types.get(result.history.run_id, "?")
                failure = result.replay_failure
                if failure is not None:
                    report.divergence = Divergence(
                        workflow_id=result.history.workflow_id,
                        run_id=result.history.run_id,
                        workflow_type=workflow_type,
                        error_type=type(failure).__name__,
                        error=str(failure),
                    )
                    break
                report.replayed += 1
                kinds[workflow_type] += 1
    report.by_type = dict(sorted(kinds.items()))
    return report


class _Histories:
    """Histories of the listed runs, fetched `concurrency` at a time by a background task."""

    _DONE = object()

    def __init__(self, client: Client, query: str, concurrency: int, report: ReplayReport):
        self._client, self._query, self._report = client, query, report
        self._queue: asyncio.Queue[object] = asyncio.Queue(maxsize=concurrency)
        self._slots = asyncio.Semaphore(concurrency)
        self.types: dict[str, str] = {}  # run id -> workflow type

    async def produce(self) -> None:
        try:
            async with asyncio.TaskGroup() as fetches:
                async for execution in self._client.list_workflows(self._query):
                    await self._slots.acquire()
                    self.types[execution.run_id] = execution.workflow_type
                    fetches.create_task(self._fetch(execution))
            await self._queue.put(self._DONE)
        except Exception as err:  # handed to the reader, which raises it
            await self._queue.put(_first_cause(err))

    async def _fetch(self, execution: WorkflowExecution) -> None:
        try:
            handle = self._client.get_workflow_handle(execution.id, run_id=execution.run_id)
            try:
                history = await handle.fetch_history()
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise
                self._report.skipped += 1  # closed and deleted since it was listed
                return
            await self._queue.put(history)
        finally:
            self._slots.release()

    async def stream(self) -> AsyncIterator[WorkflowHistory]:
        while True:
            item = await self._queue.get()
            if item is self._DONE:
                return
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, WorkflowHistory)
            yield item


def _first_cause(err: Exception) -> Exception:
    """The error itself, not the TaskGroup's group around it (a listing or a fetch that failed)."""
    while isinstance(err, ExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return err


@contextlib.asynccontextmanager
async def _fetched_histories(
    client: Client, query: str, concurrency: int, report: ReplayReport
) -> AsyncIterator[_Histories]:
    histories = _Histories(client, query, max(1, concurrency), report)
    producer = asyncio.create_task(histories.produce(), name="replay-check fetch")
    try:
        yield histories
    finally:
        producer.cancel()  # stopped at a divergence: fetch nothing more
        with contextlib.suppress(asyncio.CancelledError):
            await producer


def _since_text(since: timedelta) -> str:
    seconds = int(since.total_seconds())
    for unit in ("d", "h", "m"):
        if seconds and seconds % _UNIT_SECONDS[unit] == 0:
            return f"{seconds // _UNIT_SECONDS[unit]}{unit}"
    return f"{seconds}s" if seconds else "0"


def report_text(report: ReplayReport) -> str:
    kinds = ", ".join(f"{name} {count}" for name, count in report.by_type.items())
    window = "open" if report.since == "0" else f"open or closed in the last {report.since}"
    skipped = f"; {report.skipped} gone before they were read" if report.skipped else ""
    if report.divergence is None:
        return (
            f"replayed {report.replayed} runs ({window}) of namespace {report.namespace!r} "
            f"against this code: all replay" + (f" ({kinds})" if kinds else "") + skipped
        )
    found = report.divergence
    first_line = (found.error.strip().splitlines() or [found.error_type])[0]
    return (
        f"run {found.workflow_id} (run id {found.run_id}, {found.workflow_type}) does not replay "
        f"on this code: {found.error_type}: {first_line}\n"
        f"{report.replayed} runs replayed before it; deploy this code only behind "
        "workflow.patched (see docs/production.md)"
    )


def _arguments(check: argparse.ArgumentParser) -> None:
    # Also accepted before the command (`overnight --namespace NS replay-check`).
    check.add_argument("--namespace", default=argparse.SUPPRESS, help="Temporal namespace")
    check.add_argument(
        "--since",
        default=DEFAULT_SINCE,
        help=f"also runs closed this recently: 12h, 2d, 0 = open only (default {DEFAULT_SINCE})",
    )
    check.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"histories downloaded at once (default {DEFAULT_CONCURRENCY})",
    )
    check.add_argument("--json", action="store_true", help=JSON_HELP)


async def run(args: argparse.Namespace, connect: Connect) -> int:
    since = parse_since(args.since)  # before connecting: bad input never reaches a server
    if args.concurrency < 1:
        raise ReplayCheckInputError(f"--concurrency {args.concurrency}: give 1 or more")
    client = await connect(args)
    report = await replay_check(
        client, since=since, now=datetime.now(UTC), concurrency=args.concurrency
    )
    print(render.json_document(report) if args.json else report_text(report), flush=True)
    return 0 if report.divergence is None else 1


COMMANDS = (
    Command(
        "replay-check",
        "replay the namespace's open and recent runs against this code before a deploy",
        _arguments,
        lambda args: run(args, connect),
    ),
)
