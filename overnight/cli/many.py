"""`overnight start --many TASKS.jsonl`: every line of a tasks file a run
(overnight.core.task_lines), all checked before any starts; each run's id and whether it started now
or already had, then a summary. A re-run starts nothing twice: a line names the same run each time,
and a run id already used is reported as already started."""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from temporalio.client import Client

from overnight.cli import client as api
from overnight.cli import render
from overnight.cli.error_text import one_line
from overnight.cli.spec_size import too_large
from overnight.core.errors import RunAlreadyExists, SpecError
from overnight.core.task_lines import Task, load_tasks

# Starts in flight at once (the server answers each in a few milliseconds; hundreds at once
# only queue up in it).
STARTS_AT_ONCE = 8
Outcome = Literal["started", "already started", "failed"]


@dataclass(frozen=True)
class StartAnswer:
    line: int
    run_id: str
    outcome: Outcome
    detail: str = ""


async def start_tasks(
    client: Client, tasks: list[Task], *, task_queue: str, at_once: int = STARTS_AT_ONCE
) -> list[StartAnswer]:
    """Start every task's run (a line naming the same run as an earlier one is not started
    again); the answers in the file's order."""
    gate = asyncio.Semaphore(at_once)

    async def start(task: Task) -> StartAnswer:
        run_id = task.spec.run_id
        if task.same_as is not None:
            return StartAnswer(task.line, run_id, "already started", f"line {task.same_as}")
        async with gate:
            try:
                await api.start_run(client, task.spec, task_queue=task_queue)
            except RunAlreadyExists:
                return StartAnswer(task.line, run_id, "already started")
            except Exception as err:  # one failed start must not hide the others' answers
                return StartAnswer(task.line, run_id, "failed", one_line(err))
        return StartAnswer(task.line, run_id, "started")

    return list(await asyncio.gather(*(start(task) for task in tasks)))


def answers_text(answers: list[StartAnswer]) -> str:
    width = max(len(a.run_id) for a in answers)
    lines = []
    for a in answers:
        detail = f" ({a.detail})" if a.detail else ""
        lines.append(f"line {a.line:<5} {a.run_id:<{width}}  {a.outcome}{detail}")
    lines.append(summary(answers))
    return "\n".join(lines)


def summary(answers: list[StartAnswer]) -> str:
    counts = Counter(a.outcome for a in answers)
    return (
        f"{len(answers)} runs: {counts['started']} started, "
        f"{counts['already started']} already started, {counts['failed']} failed"
    )


def answers_document(answers: list[StartAnswer]) -> dict[str, Any]:
    counts = Counter(a.outcome for a in answers)
    return {
        "runs": [asdict(a) for a in answers],
        "started": counts["started"],
        "already_started": counts["already started"],
        "failed": counts["failed"],
    }


async def run(args: argparse.Namespace, connect: Callable[[], Awaitable[Client]]) -> int:
    """The command: 0 when every run started or already had, 1 when a start failed; a bad
    line is a `SpecError` (exit 2) before anything starts."""
    tasks = load_tasks(args.many)
    for task in tasks:  # before any starts, as a bad line is
        if (problem := too_large(task.spec)) is not None:
            raise SpecError(f"{args.many} line {task.line}: {problem}")
    client = await connect()
    answers = await start_tasks(client, tasks, task_queue=args.task_queue)
    if args.json:
        print(render.json_document(answers_document(answers)))
    else:
        print(answers_text(answers), flush=True)
    return 1 if any(a.outcome == "failed" for a in answers) else 0
