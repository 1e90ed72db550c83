"""Running AgentRun against a FakeWorld on the time-skipping server, one task queue per run.

Histories: `OVERNIGHT_RECORD_HISTORIES=1 .venv/bin/pytest tests/workflow` rewrites the files
in tests/histories/ from the tests that call `keep_history`; `test_replay.py` replays them all.
Re-record after a deliberate change to the workflow's commands (and say so in the commit).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.service import RPCError
from temporalio.worker import Worker

from fakes.activities import FakeWorld
from overnight.core.models import RunResult, RunSpec, RunStatus
from tests.waits import CAP
from workflows.agent_run import AgentRun
from workflows.notify_run import NotifyRun

HISTORIES = Path(__file__).resolve().parent.parent / "histories"
RECORD_ENV = "OVERNIGHT_RECORD_HISTORIES"

T = TypeVar("T")
Handle = WorkflowHandle[Any, RunResult]


def make_spec(**overrides: Any) -> RunSpec:
    """A spec with the design's defaults and a run id no other test uses."""
    return RunSpec(
        run_id=f"run-{uuid.uuid4().hex[:12]}",
        repo="file:///tmp/repo",
        agent_dir="/tmp/agent",
        command="python3 /workspace/agent/main.py --resume /workspace/checkpoint.json",
        **overrides,
    )


@asynccontextmanager
async def running_worker(client: Client, world: FakeWorld) -> AsyncIterator[str]:
    task_queue = f"agent-run-{uuid.uuid4().hex}"
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentRun, NotifyRun],
        activities=world.activities(),
        # Deliver cancellations to heartbeating fakes at once, not after a throttled minute.
        max_heartbeat_throttle_interval=timedelta(milliseconds=100),
        default_heartbeat_throttle_interval=timedelta(milliseconds=100),
    ):
        yield task_queue


@asynccontextmanager
async def started_run(client: Client, world: FakeWorld, spec: RunSpec) -> AsyncIterator[Handle]:
    """A worker on a fresh task queue and an AgentRun started on it."""
    async with running_worker(client, world) as task_queue:
        handle: Handle = await client.start_workflow(
            "AgentRun", spec, id=spec.run_id, task_queue=task_queue, result_type=RunResult
        )
        try:
            yield handle
        finally:
            # A test that failed half-way must not leave its run holding the shared server.
            with contextlib.suppress(RPCError):
                await handle.terminate(reason="test over")


async def status_of(handle: Handle) -> RunStatus:
    status: RunStatus = await handle.query("status", result_type=RunStatus)
    return status


async def eventually(
    probe: Callable[[], Awaitable[T]], accept: Callable[[T], bool], timeout: float = CAP
) -> T:
    """Poll `probe` (in real time; the server's clock stands still meanwhile) until accepted.
    Under a time cap (CAP), not 10 s: the test's own workers answer on a loaded machine too."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if accept(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still not there after {timeout} s: {value!r}")
        await asyncio.sleep(0.05)


async def until_idle(world: FakeWorld, quiet_for: float = 0.3) -> None:
    """Wait until the run has stopped calling activities: it now waits on a durable timer.

    The server's clock stands still until a test skips time, so a quiet run settles on its
    next-look timer. Signalling it then keeps tests clear of a time-skipping test server race:
    cancelling an activity whose completion is already on its way fails the workflow task
    there ("ACTIVITY_UNKNOWN"), which a real server tolerates.
    """
    seen = (-1, -1)
    while seen != (len(world.observed), len(world.log)):
        seen = (len(world.observed), len(world.log))
        await asyncio.sleep(quiet_for)


async def until_state(handle: Handle, state: str) -> RunStatus:
    return await eventually(lambda: status_of(handle), lambda status: status.state == state)


async def run_histories(
    client: Client, workflow_id: str, first_run_id: str | None
) -> list[WorkflowHistory]:
    """The history of every run of a continue-as-new chain, first run first."""
    runs: list[WorkflowHistory] = []
    run_id = first_run_id
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        runs.append(history)
        last = history.events[-1]
        run_id = None
        if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return runs


async def keep_history(handle: Handle, name: str) -> None:
    """Check this run's history in as tests/histories/{name}.json when re-recording."""
    if os.environ.get(RECORD_ENV) != "1":
        return
    history = await handle.fetch_history()
    HISTORIES.mkdir(exist_ok=True)
    (HISTORIES / f"{name}.json").write_text(history.to_json())
