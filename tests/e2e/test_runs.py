"""Runs of the real sample agent, supervised end to end: cancel, extend, reap."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from temporalio.client import Client

from activities.providers.local.provider import LocalProvider
from overnight.cli import client as api
from overnight.core.constants import LABEL_RUN
from overnight.core.models import BudgetExtension
from overnight.demo.sample_demo import ledger_entries
from overnight.worker.devserver import DevServer
from tests.e2e.helpers import (
    agent_pids,
    agent_spec,
    new_run_id,
    wait_for_status,
    wait_no_agent_processes,
)
from tests.waits import CAP

OVERNIGHT = Path(sys.executable).parent / "overnight"
SLOW_STEPS = {"AGENT_STEP_DELAY": "30"}  # the agent sits in its first step


async def _start_slow_run(
    client: Client, task_queue: str, tmp_path: Path, prefix: str, runs: list[str]
) -> str:
    run_id = new_run_id(prefix)
    runs.append(run_id)
    spec, _ = agent_spec(run_id, tmp_path, agent_env=SLOW_STEPS)
    await api.start_run(client, spec, task_queue=task_queue)
    await wait_for_status(client, run_id, lambda s: s.state == "running" and bool(s.process_id))
    assert agent_pids(run_id), "the agent should be running"
    return run_id


async def test_cancel_mid_run_leaves_no_process_running(
    dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    run_id = await _start_slow_run(dev_client, task_queue, tmp_path, "cancel", runs)

    await api.cancel_run(dev_client, run_id, "changed my mind")
    result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=CAP)

    assert result.outcome == "cancelled"
    assert await wait_no_agent_processes(run_id) == []
    sandboxes = await LocalProvider().list({LABEL_RUN: run_id}, include_stopped=True)
    assert sandboxes and {s.state for s in sandboxes} == {"stopped"}


async def test_extend_after_needs_attention_resumes_the_run(
    dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    run_id = new_run_id("extend")
    runs.append(run_id)
    spec, files = agent_spec(
        run_id, tmp_path, agent_env={"AGENT_DIE_AFTER": "1"}, budget={"max_restarts": 0}
    )
    await api.start_run(dev_client, spec, task_queue=task_queue)
    waiting = await wait_for_status(dev_client, run_id, lambda s: s.state == "needs_attention")
    assert waiting.restarts_used == 0

    await api.extend_budget(dev_client, run_id, BudgetExtension(restarts=1))
    result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=CAP)

    assert result.outcome == "finished"
    assert result.restarts == 1
    assert [entry["key"] for entry in ledger_entries(files.ledger)] == [
        f"{run_id}-step-4",
        f"{run_id}-step-5",
    ]
    assert await wait_no_agent_processes(run_id) == []


async def test_reap_stops_an_orphan_left_by_a_terminated_workflow(
    dev_server: DevServer, dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    orphaned = await _start_slow_run(dev_client, task_queue, tmp_path, "orphan", runs)
    still_running = await _start_slow_run(dev_client, task_queue, tmp_path, "alive", runs)
    await dev_client.get_workflow_handle(orphaned).terminate("simulated operator mistake")
    assert agent_pids(orphaned), "a terminated workflow cannot stop its sandbox"

    reaped = await asyncio.to_thread(
        subprocess.run,
        [str(OVERNIGHT), "--address", dev_server.address, "reap", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )

    assert reaped.returncode == 0, reaped.stderr
    entries = json.loads(reaped.stdout)
    # Only this test's runs are judged: the process's home may hold what others left.
    ours = [entry for entry in entries if entry["run_id"] in (orphaned, still_running)]
    assert {entry["run_id"] for entry in ours} == {orphaned}
    assert all(entry["stopped"] for entry in ours)
    assert await wait_no_agent_processes(orphaned) == []
    assert agent_pids(still_running), "reap must leave a live run's sandbox alone"

    await api.cancel_run(dev_client, still_running)
    await asyncio.wait_for(api.wait_result(dev_client, still_running), timeout=CAP)
    assert await wait_no_agent_processes(still_running) == []
