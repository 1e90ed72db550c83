"""The demo scenario played by every example agent on the real stack (dev server, worker, local
sandboxes isolated with bubblewrap): the sample agent on the agent kit and the shell agent with
no Python of its own each crash after opening their pull request, are restarted from their
last checkpoint, and finish with each outside action done exactly once. The docs' minimal
agent runs too."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from temporalio.client import Client

from overnight.cli import client as api
from overnight.demo.outside_world import ledger_url
from overnight.demo.sample_demo import (
    AGENT_COMMAND,
    AGENT_DIR,
    demo_spec,
    ledger_entries,
    make_origin,
)
from tests.e2e.helpers import new_run_id
from tests.waits import CAP

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
AGENTS = {
    "python-on-the-kit": (AGENT_DIR, AGENT_COMMAND),
    "shell": (EXAMPLES / "shell_agent", "bash /workspace/agent/agent.sh"),
}


@pytest.mark.parametrize("agent", sorted(AGENTS))
async def test_each_example_agent_recovers_from_the_demo_crash_doing_each_outside_action_once(
    dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str], agent: str
) -> None:
    agent_dir, command = AGENTS[agent]
    run_id = new_run_id("demo")
    files = make_origin(tmp_path / run_id)
    spec = demo_spec(
        run_id, files, ledger=ledger_url(files.ledger), agent_dir=agent_dir, command=command
    )
    runs.append(run_id)
    began = time.monotonic()

    await api.start_run(dev_client, spec, task_queue=task_queue)
    result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=CAP)

    took = time.monotonic() - began
    status = await api.get_status(dev_client, run_id)
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 2, 1), took
    assert [r.reason for r in status.restarts] == ["agent crashed (exit 3)"]
    assert status.isolation is not None and status.isolation.startswith("isolated (bubblewrap)")
    actions = [(e["key"], e["action"]) for e in ledger_entries(files.ledger)]
    assert actions == [
        (f"{run_id}-step-4", "open_pull_request"),
        (f"{run_id}-step-5", "post_summary"),
    ]
    checkpoint = json.loads(result.checkpoint or "{}")
    assert (checkpoint["step"], checkpoint["next"], len(checkpoint["done"])) == (5, "done", 5)
    assert checkpoint["done_actions"] == [key for key, _ in actions]
    assert checkpoint["notes"][3:] == [
        "attempt 2 resumed at step 4: agent crashed (exit 3)",
        "step 4: pull request already open: not reopened",
        "step 5: posted the summary",
    ]
    pushed = subprocess.run(
        ["git", "log", "--format=%s", f"agent/{run_id}", "--", "migrations"],
        cwd=files.origin,
        capture_output=True,
        text=True,
        check=True,
    )
    assert pushed.stdout.splitlines() == ["step 2: write the migration"]


async def test_the_readmes_minimal_agent_runs_with_one_fresh_start_and_one_pull_request(
    dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    run_id = new_run_id("minimal")
    files = make_origin(tmp_path / run_id)
    spec = demo_spec(
        run_id,
        files,
        ledger=ledger_url(files.ledger),
        agent_dir=EXAMPLES / "minimal_agent",
        command="python3 /workspace/agent/main.py",
    )
    runs.append(run_id)

    await api.start_run(dev_client, spec, task_queue=task_queue)
    result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=CAP)

    status = await api.get_status(dev_client, run_id)
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert status.fresh_starts_used == 1
    assert [e["key"] for e in ledger_entries(files.ledger)] == [f"{run_id}-step-3"]
    checkpoint = json.loads(result.checkpoint or "{}")
    assert (checkpoint["step"], checkpoint["next"]) == (3, "done")
    assert "attempt 1 resumed at step 2: context window full: fresh start" in checkpoint["notes"]
