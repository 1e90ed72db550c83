"""The `overnight` CLI against a real server: `--json` shapes, human output, exit codes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from temporalio.client import Client

from overnight.cli import client as api
from overnight.core.models import RunStatus
from overnight.worker.devserver import DevServer
from tests.e2e.helpers import agent_spec, new_run_id, wait_for_status
from tests.waits import CAP

OVERNIGHT = Path(sys.executable).parent / "overnight"


async def overnight(server: DevServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OVERNIGHT_UI_URL": server.ui_url}
    return await asyncio.to_thread(
        subprocess.run,
        [str(OVERNIGHT), "--address", server.address, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


async def test_cli_starts_shows_lists_extends_and_cancels_a_run(
    dev_server: DevServer, dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    run_id = new_run_id("cli")
    runs.append(run_id)
    # The run must stay in attempt 1, running, for as long as the test looks at it, however
    # slow the machine: its agent's step, its stall threshold and its lease all outlast the
    # test (at the helpers' 10 s stall a loaded test saw attempt 2 after "agent stalled 10 s").
    spec, _ = agent_spec(
        run_id,
        tmp_path,
        agent_env={"AGENT_STEP_DELAY": "3600"},
        stall_seconds=3600,
        sandbox_timeout_seconds=3600,
    )
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.model_dump_json())
    link = f"{dev_server.ui_url}/namespaces/{dev_server.namespace}/workflows/{run_id}"

    started = await overnight(
        dev_server, "start", str(spec_file), "--json", "--task-queue", task_queue
    )
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout) == {"run_id": run_id, "web_ui": link}

    again = await overnight(dev_server, "start", str(spec_file), "--task-queue", task_queue)
    assert again.returncode == 2
    assert again.stderr.strip() == f"overnight: run {run_id!r} is already running"

    await wait_for_status(dev_client, run_id, lambda s: s.state == "running")
    as_json = await overnight(dev_server, "status", run_id, "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert RunStatus.model_validate_json(as_json.stdout).state == "running"

    human = await overnight(dev_server, "status", run_id)
    assert human.returncode == 0, human.stderr
    assert f"{run_id}: running, attempt 1" in human.stdout
    assert "budget left:   5 restarts, 24.0 h" in human.stdout
    assert f"Web UI:        {link}" in human.stdout

    extended = await overnight(dev_server, "extend", run_id, "--restarts", "1")
    assert extended.returncode == 0, extended.stderr
    await wait_for_status(dev_client, run_id, lambda s: s.budget.max_restarts == 6)

    listed = await _listed(dev_server, run_id)
    assert listed["workflow_status"] == "running"
    assert set(listed) >= {"run_id", "state", "restarts", "started_at", "closed_at"}

    cancelled = await overnight(dev_server, "cancel", run_id, "--reason", "test over")
    assert cancelled.returncode == 0, cancelled.stderr
    result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=CAP)
    assert result.outcome == "cancelled"

    late = await overnight(dev_server, "cancel", run_id)
    assert late.returncode == 1
    assert "no longer running" in late.stderr


async def test_status_of_an_unknown_run_is_one_line_and_exit_1(dev_server: DevServer) -> None:
    done = await overnight(dev_server, "status", "no-such-run")
    assert done.returncode == 1
    assert done.stderr == "overnight: no run 'no-such-run' in this namespace\n"


async def _listed(server: DevServer, run_id: str) -> dict[str, object]:
    """The run's entry in `overnight list --json` (visibility is eventually consistent).
    Under a time cap (CAP), not 50 looks: a loaded machine's visibility may lag longer."""
    give_up = time.monotonic() + CAP
    while time.monotonic() < give_up:
        done = await overnight(server, "list", "--json")
        assert done.returncode == 0, done.stderr
        for entry in json.loads(done.stdout):
            if entry["run_id"] == run_id:
                return dict(entry)
        await asyncio.sleep(0.2)
    raise AssertionError(f"{run_id} never listed")
