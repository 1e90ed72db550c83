"""The console's shared runs source against a real dev server: AgentRun itself (its sandbox
activities are the scripted fakes), the rows read from one visibility list, no query per run,
and a change yielded when a run's state changes."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.worker import Worker

from fakes.activities import FakeWorld, Quiet, progress
from overnight.console.rows import RunRow
from overnight.console.runs_source import ChangeFeed, RunsChange, RunsSource
from overnight.core.codec import data_converter, parse_keys
from overnight.core.constants import SEARCH_ATTRIBUTE_TYPES
from overnight.core.models import RunResult, RunSpec
from workflows.agent_run import AgentRun
from workflows.notify_run import NotifyRun

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Caps on waiting for an event, not bounds asserted: a loaded machine may take long.
CAP = 120.0


def _spec(run_id: str, owner: str, labels: list[str]) -> RunSpec:
    return RunSpec(
        run_id=run_id,
        repo="file:///tmp/repo",
        agent_dir="/tmp/agent",
        command="python3 /workspace/agent/main.py",
        owner=owner,
        labels=labels,
        poll_seconds=1,
        stall_seconds=3600,
    )


def _world(next_step: str) -> FakeWorld:
    """Activities whose agent says `next_step` in its first checkpoint, then nothing."""
    world = FakeWorld()
    world.search_attributes = list(SEARCH_ATTRIBUTE_TYPES)
    step = json.dumps({"next": next_step, "notes": ["read the issue"]})
    world.script(1, [progress(step), *[Quiet() for _ in range(10_000)]])
    return world


async def _start(
    client: Client, queue: str, run_id: str, owner: str, labels: list[str]
) -> WorkflowHandle[Any, RunResult]:
    return await client.start_workflow(
        "AgentRun",
        _spec(run_id, owner, labels),
        id=run_id,
        task_queue=queue,
        result_type=RunResult,
    )


async def _row_with_a_step(source: RunsSource, feed: ChangeFeed, run_id: str) -> RunRow:
    """The run's row once it has the agent's next step (its first checkpoint read)."""
    async with asyncio.timeout(CAP):
        while (row := source.row(run_id)) is None or row.next_step is None:
            await _next_change(feed, run_id)
    return row


async def _next_change(changes: ChangeFeed, run_id: str) -> RunsChange:
    async with asyncio.timeout(CAP):
        async for change in changes:
            if run_id in change.changed:
                return change
    raise AssertionError("the change feed ended")


async def test_the_source_lists_runs_with_their_rows_and_tells_a_state_change(
    dev_client: Client,
) -> None:
    world = _world("write the parser")
    queue = f"console-source-{uuid.uuid4().hex[:8]}"
    run_id = f"console-{uuid.uuid4().hex[:10]}"
    owner = f"team-{uuid.uuid4().hex[:6]}"
    async with (
        Worker(
            dev_client,
            task_queue=queue,
            workflows=[AgentRun, NotifyRun],
            activities=world.activities(),
            max_heartbeat_throttle_interval=timedelta(milliseconds=100),
            default_heartbeat_throttle_interval=timedelta(milliseconds=100),
        ),
        RunsSource(dev_client, every=0.5) as source,
    ):
        feed = source.changes()
        handle = await _start(dev_client, queue, run_id, owner, ["nightly", "team:web"])
        try:
            row = await _row_with_a_step(source, feed, run_id)
            assert row.state == "running" and not row.closed
            assert (row.owner, row.labels, row.agent) == (owner, ["nightly", "team:web"], "own")
            assert (row.attempt, row.next_step, row.max_hours) == (1, "write the parser", 24)
            assert row.has_row

            # Filters go into the visibility query: the owner's runs alone come back.
            class ByOwner:
                label = agent = ""
                since = until = None

                def __init__(self, owner: str) -> None:
                    self.owner = owner

                def keeps(self, found: object) -> bool:
                    return getattr(found, "owner", None) == self.owner

            searched = await source.search(ByOwner(owner))
            assert [found.run_id for found in searched] == [run_id]

            polls, requests = source.polls, source.requests
            await handle.signal("cancel", "seen enough")
            # The row memo says "cancelled" a moment before visibility lists the run closed:
            # two changes, seen in either one poll or two.
            change = await _next_change(feed, run_id)
            while (ended := source.row(run_id)) is not None and not ended.closed:
                change = await _next_change(feed, run_id)
            assert ended is not None and ended.closed and ended.state == "cancelled"
            assert run_id in change.changed
            # One or two list requests a poll (open runs, then closed ones), none per run.
            assert source.requests - requests <= 2 * (source.polls - polls)
        finally:
            await feed.aclose()
            with contextlib.suppress(RPCError):  # ended already
                await handle.terminate()


async def test_an_encrypted_row_is_read_with_the_key_and_is_no_row_without_it(
    dev_client: Client,
) -> None:
    """With OVERNIGHT_CODEC_KEYS the row memo is encrypted like every payload: the console
    reads it through its client's converter; a client without the key gets no row, only what
    the search attributes say."""
    keyring = parse_keys("k1:" + base64.b64encode(secrets.token_bytes(32)).decode())
    secret_client = Client(
        dev_client.service_client,
        namespace=dev_client.namespace,
        data_converter=data_converter(keyring, from_env=False),
    )
    world = _world("rotate the keys")
    queue = f"console-codec-{uuid.uuid4().hex[:8]}"
    run_id = f"console-codec-{uuid.uuid4().hex[:10]}"
    async with (
        Worker(
            secret_client,
            task_queue=queue,
            workflows=[AgentRun, NotifyRun],
            activities=world.activities(),
        ),
        RunsSource(secret_client, every=0.5) as with_key,
        RunsSource(dev_client, every=0.5) as without_key,
    ):
        feed = with_key.changes()
        handle = await _start(secret_client, queue, run_id, "team-keys", [])
        try:
            row = await _row_with_a_step(with_key, feed, run_id)
            assert row.has_row and row.next_step == "rotate the keys"
            await without_key.poll()
            blind = without_key.row(run_id)
            assert blind is not None and blind.owner == "team-keys"
            assert not blind.has_row and blind.next_step is None
        finally:
            await feed.aclose()
            with contextlib.suppress(RPCError):
                await handle.terminate()
