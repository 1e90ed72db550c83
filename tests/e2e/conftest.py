"""End-to-end fixtures: the session's real dev server, a worker in this process (AgentRun, the
sandbox activities, the local provider), and real sample-agent processes.

After every end-to-end test no sandbox it made may still be running: `runs` asserts it for
the runs a test registers (after terminating any it left open), `no_sandbox_left_running` for
everything else the test made (e.g. the demo's run). Leaks are stopped, then reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from activities.providers.local.provider import LocalProvider
from overnight.core.constants import LABEL_RUN
from overnight.worker.runner import serve
from tests.live import granted
from tests.waits import CAP

# The session worker grants what the end-to-end tests ask for on purpose: binds inside the
# session's temporary folder, unisolated runs (tests/e2e/test_isolated_runs.py) and these
# secrets (tests/e2e/test_operator.py). Refusals: tests/e2e/test_spec_grants.py.
SESSION_SECRETS = ("OVERNIGHT_OPERATOR_TEST_SECRET",)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def task_queue(dev_client: Client) -> AsyncIterator[str]:
    """A worker polling a task queue of its own for the whole session; its name."""
    queue = f"e2e-{uuid.uuid4().hex[:8]}"
    ready, stop = asyncio.Event(), asyncio.Event()
    grants = granted(allow_unisolated=True, secret_env=SESSION_SECRETS)
    worker = asyncio.create_task(
        serve(dev_client, task_queue=queue, ready=ready, stop=stop, grants=grants)
    )
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({worker, waiter}, timeout=CAP, return_when=asyncio.FIRST_COMPLETED)
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
    leaked: list[str] = []
    for run_id in started:
        handle = dev_client.get_workflow_handle(run_id)
        still_open = False
        with contextlib.suppress(RPCError):
            if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                still_open = True
                await handle.terminate("test cleanup")
        for sandbox in await provider.list({LABEL_RUN: run_id}, include_stopped=False):
            if not still_open and sandbox.state in ("running", "starting"):
                leaked.append(sandbox.sandbox_id)  # the run ended but left it running
            await provider.stop(sandbox.sandbox_id)
    assert not leaked, f"runs that ended left sandboxes running: {leaked}"


@pytest_asyncio.fixture(autouse=True, loop_scope="session")
async def no_sandbox_left_running(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Fail the test if a sandbox it created is still running when it is over.

    Autouse, so set up before `runs` and torn down after it: what `runs` has cleaned up
    (and reported) is not reported twice.
    """
    provider = LocalProvider()
    before = {s.sandbox_id for s in await provider.list({}, include_stopped=False)}
    yield
    left = [
        sandbox
        for sandbox in await provider.list({}, include_stopped=False)
        if sandbox.sandbox_id not in before and sandbox.state in ("running", "starting")
    ]
    for sandbox in left:
        await provider.stop(sandbox.sandbox_id)
    assert not left, f"{request.node.name} left sandboxes running: {[s.sandbox_id for s in left]}"
