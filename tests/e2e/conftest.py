"""End-to-end fixtures: the session's real dev server, a worker in this process (AgentRun, the
sandbox activities, the local provider), and real sample-agent processes."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from activities.local import LocalProvider
from overnight.constants import LABEL_RUN
from overnight.runner import serve


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def task_queue(dev_client: Client) -> AsyncIterator[str]:
    """A worker polling a task queue of its own for the whole session; its name."""
    queue = f"e2e-{uuid.uuid4().hex[:8]}"
    ready, stop = asyncio.Event(), asyncio.Event()
    worker = asyncio.create_task(serve(dev_client, task_queue=queue, ready=ready, stop=stop))
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({worker, waiter}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if worker.done():
        worker.result()  # raises why the worker could not start
    assert ready.is_set(), "the e2e worker did not start polling"
    try:
        yield queue
    finally:
        stop.set()
        await asyncio.wait_for(worker, timeout=60)


@pytest_asyncio.fixture(loop_scope="session")
async def runs(dev_client: Client) -> AsyncIterator[list[str]]:
    """Run ids a test started. Afterwards, even when the test failed, none of them is left
    running: open workflows are terminated and their sandboxes stopped."""
    started: list[str] = []
    yield started
    provider = LocalProvider()
    for run_id in started:
        handle = dev_client.get_workflow_handle(run_id)
        with contextlib.suppress(RPCError):
            if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await handle.terminate("test cleanup")
        for sandbox in await provider.list({LABEL_RUN: run_id}, include_stopped=False):
            await provider.stop(sandbox.sandbox_id)
