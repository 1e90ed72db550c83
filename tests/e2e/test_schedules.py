"""Runs on Temporal Schedules through `overnight schedule ...` on the dev server: a schedule
fires AgentRuns named after it, `trigger` fires one now, overlap `skip` holds while a run is
going (and `describe` says so), and `delete` leaves running runs alone."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest_asyncio
from temporalio.client import Client, WorkflowExecutionStatus

from activities.providers.local.provider import LocalProvider
from overnight.cli import client as api
from overnight.core.constants import LABEL_RUN
from overnight.core.models import RunStatus
from overnight.worker.devserver import DevServer
from tests.e2e.helpers import agent_spec
from tests.e2e.test_cli_live import OVERNIGHT, overnight
from tests.waits import CAP

T = TypeVar("T")


def spec_file(tmp_path: Path, step_delay: float) -> Path:
    spec, _ = agent_spec(
        f"sched-{uuid.uuid4().hex[:6]}", tmp_path, agent_env={"AGENT_STEP_DELAY": str(step_delay)}
    )
    path = tmp_path / "nightly.json"
    path.write_text(json.dumps(spec.model_dump(mode="json", exclude={"run_id", "branch"})))
    return path


async def firings(client: Client, name: str) -> list[str]:
    found = [
        w.id
        async for w in client.list_workflows('WorkflowType = "AgentRun"')
        if w.id.startswith(f"{name}-")
    ]
    return sorted(found)


async def until(
    probe: Callable[[], Awaitable[T]], accept: Callable[[T], bool], timeout: float = CAP
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if accept(value) or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.5)


@pytest_asyncio.fixture(loop_scope="session")
async def schedule_name(dev_server: DevServer, dev_client: Client) -> AsyncIterator[str]:
    """A schedule name; afterwards, whatever the test did, the schedule is gone, every run it
    started has ended (cancelled through the `cancel` signal, which stops its sandboxes, or
    terminated if it does not end in time) and none of their sandboxes still runs."""
    name = f"nightly-{uuid.uuid4().hex[:6]}"
    try:
        yield name
    finally:
        await overnight(dev_server, "schedule", "delete", name)
        try:
            for workflow_id in await firings(dev_client, name):
                await end_run(dev_client, workflow_id)
        finally:
            await stop_sandboxes_of(name)


async def end_run(client: Client, workflow_id: str) -> None:
    handle = client.get_workflow_handle(workflow_id)
    if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
        return
    try:
        await api.cancel_run(client, workflow_id, "test over")
        await asyncio.wait_for(handle.result(), timeout=60)
    except api.RunNotRunning:
        return  # it ended on its own between the look and the cancel
    except TimeoutError:
        await handle.terminate("test over: the cancel did not end it in 60 s")
        raise


async def stop_sandboxes_of(name: str) -> None:
    """Stop every sandbox of the schedule's runs (their run ids begin with its name) once they
    have ended, and fail if one still ran: an ended run must have stopped it itself. A paused
    one is a failed attempt's, set aside for a look until `reap`; its processes are frozen but
    alive, so it is stopped too, without failing."""
    provider = LocalProvider()
    ours = [
        box
        for box in await provider.list({}, include_stopped=False)
        if box.labels.get(LABEL_RUN, "").startswith(f"{name}-")
    ]
    for box in ours:
        await provider.stop(box.sandbox_id)
    running = [box.sandbox_id for box in ours if box.state != "paused"]
    assert not running, f"the runs of {name} ended and left sandboxes running: {running}"


async def test_a_schedule_fires_agent_runs_whose_run_id_comes_from_the_firing(
    dev_server: DevServer, dev_client: Client, task_queue: str, tmp_path: Path, schedule_name: str
) -> None:
    created = await overnight(
        dev_server, "schedule", "create", schedule_name, str(spec_file(tmp_path, 0.2)),
        "--every", "2s", "--task-queue", task_queue, "--json",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["when"] == "every 2s"
    fired = await until(lambda: firings(dev_client, schedule_name), lambda ids: len(ids) >= 1)
    assert fired, "the schedule never fired"
    status: RunStatus = await until(
        lambda: api.get_status(dev_client, fired[0]), lambda s: s.sandbox_id is not None
    )
    assert status.run_id.startswith(schedule_name) and status.run_id != fired[0]
    listed = await overnight(dev_server, "schedule", "list")
    assert schedule_name in listed.stdout


async def test_trigger_fires_a_run_now(
    dev_server: DevServer, dev_client: Client, task_queue: str, tmp_path: Path, schedule_name: str
) -> None:
    created = await overnight(
        dev_server, "schedule", "create", schedule_name, str(spec_file(tmp_path, 0.2)),
        "--cron", "0 1 1 1 *", "--timezone", "Europe/Berlin", "--task-queue", task_queue,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert await firings(dev_client, schedule_name) == []
    triggered = await overnight(dev_server, "schedule", "trigger", schedule_name)
    assert triggered.returncode == 0, triggered.stderr
    fired = await until(lambda: firings(dev_client, schedule_name), lambda ids: len(ids) == 1)
    assert len(fired) == 1
    described = await overnight(dev_server, "schedule", "describe", schedule_name, "--json")
    shown = json.loads(described.stdout)
    assert (shown["when"], shown["timezone"]) == ("cron 0 1 1 1 *", "Europe/Berlin")


async def test_overlap_skip_holds_while_a_run_is_going_and_delete_leaves_it_running(
    dev_server: DevServer, dev_client: Client, task_queue: str, tmp_path: Path, schedule_name: str
) -> None:
    created = await overnight(
        dev_server, "schedule", "create", schedule_name, str(spec_file(tmp_path, 30)),
        "--every", "2s", "--task-queue", task_queue,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    described = await until(
        lambda: overnight(dev_server, "schedule", "describe", schedule_name, "--json"),
        lambda done: json.loads(done.stdout)["skipped_for_overlap"] >= 2,
    )
    shown = json.loads(described.stdout)
    assert shown["skipped_for_overlap"] >= 2 and len(shown["running"]) == 1
    assert len(await firings(dev_client, schedule_name)) == 1
    human = await overnight(dev_server, "schedule", "describe", schedule_name)
    assert "because a run was still going" in human.stdout

    deleted = await overnight(dev_server, "schedule", "delete", schedule_name)
    assert deleted.returncode == 0, deleted.stderr
    gone = await overnight(dev_server, "schedule", "describe", schedule_name)
    assert gone.returncode == 1 and "no schedule" in gone.stderr
    running = dev_client.get_workflow_handle(shown["running"][0])
    assert (await running.describe()).status == WorkflowExecutionStatus.RUNNING


async def test_a_scheduled_spec_with_a_run_id_is_refused_before_connecting(
    tmp_path: Path,
) -> None:
    spec, _ = agent_spec("fixed-id", tmp_path)
    path = tmp_path / "fixed.json"
    path.write_text(spec.model_dump_json())
    # Nothing listens at this address: a command that wrongly connects fails with 1, not 2.
    refused = await asyncio.to_thread(
        subprocess.run,
        [str(OVERNIGHT), "--address", "127.0.0.1:9", "schedule", "create", "n", str(path)]
        + ["--every", "1d"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "run_id" in refused.stderr
