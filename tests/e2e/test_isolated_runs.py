"""Supervised runs on isolated local sandboxes: what the agent may not touch, what it may, and
`isolation: "none"` when asked for."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from overnight.cli import client as api
from overnight.core.models import BudgetExtension, RunResult, RunSpec
from overnight.demo.outside_world import ledger_url
from overnight.demo.sample_demo import ledger_entries
from overnight.worker.devserver import DevServer
from tests.e2e.helpers import agent_spec, new_run_id, wait_for_status, wait_no_agent_processes
from tests.live import scripted_spec

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
OVERNIGHT = Path(sys.executable).parent / "overnight"


async def _finish(client: Client, task_queue: str, spec: RunSpec, runs: list[str]) -> RunResult:
    runs.append(spec.run_id)
    await api.start_run(client, spec, task_queue=task_queue)
    return await asyncio.wait_for(api.wait_result(client, spec.run_id), timeout=60)


async def test_an_agent_cannot_write_outside_its_sandbox_and_the_run_carries_on(
    dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    run_id = new_run_id("escape")
    name = f"overnight-escape-{uuid.uuid4().hex[:8]}"
    targets = [Path.home() / name, Path("/tmp") / name, tmp_path / name]
    spec = scripted_spec(
        run_id, tmp_path, "escape", env={"AGENT_ESCAPE_PATHS": ":".join(map(str, targets))}
    )

    result = await _finish(dev_client, task_queue, spec, runs)

    assert result.outcome == "finished" and result.restarts == 0
    assert [t for t in targets if t.exists()] == [], "the agent wrote on the host"
    tries = json.loads(result.checkpoint or "{}")["tries"]
    # The worker's home is not in the sandbox at all (a root worker's agent is another user).
    assert tries[str(targets[0])] in (
        "refused: Permission denied",
        "refused: No such file or directory",
        "refused: Read-only file system",
    )
    # /tmp paths land in the sandbox's own /tmp, never the host's.
    assert tries[str(targets[1])] == "written"


async def test_a_hard_coded_checkpoint_path_recovers_like_the_variable(
    dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    def steps_spec(hard_coded: bool) -> RunSpec:
        run_id = new_run_id("hardcoded" if hard_coded else "variable")
        env = {
            "AGENT_HARDCODED": "1" if hard_coded else "0",
            "AGENT_DIE_AFTER": "2",
            "AGENT_HOLD": "0.3",
            "OVERNIGHT_LEDGER_URL": ledger_url(tmp_path / run_id / "ledger.jsonl"),
        }
        return scripted_spec(run_id, tmp_path, "steps", env=env)

    specs = [steps_spec(hard_coded=True), steps_spec(hard_coded=False)]
    results = await asyncio.gather(*(_finish(dev_client, task_queue, s, runs) for s in specs))

    for spec, result in zip(specs, results, strict=True):
        status = await api.get_status(dev_client, spec.run_id)
        assert (result.outcome, result.attempts, result.restarts) == ("finished", 2, 1)
        assert [r.reason for r in status.restarts] == ["agent crashed (exit 3)"]
        # Attempt 2 started from step 1's checkpoint: step 2 redone, step 1 not.
        assert json.loads(result.checkpoint or "{}")["notes"] == [
            "step 1 in attempt 1",
            "step 2 in attempt 2",
            "step 3 in attempt 2",
        ]


async def test_a_declared_writable_bind_takes_the_agents_pushes(
    dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    run_id = new_run_id("bind")
    spec, files = agent_spec(run_id, tmp_path)
    assert [(b.path, b.writable) for b in spec.binds] == [(str(files.origin), True)]

    result = await _finish(dev_client, task_queue, spec, runs)

    assert result.outcome == "finished"
    pushed = subprocess.run(
        ["git", "log", "--format=%s", f"agent/{run_id}"],
        cwd=files.origin,
        capture_output=True,
        text=True,
        check=True,
    )
    assert pushed.stdout.splitlines()[0] == "step 5: post a summary"
    status = await api.get_status(dev_client, run_id)
    assert status.isolation is not None
    assert status.isolation.startswith("isolated (bubblewrap)")
    assert f"binds: {files.origin} (writable)" in status.isolation


async def test_a_run_without_isolation_works_and_says_so(
    dev_server: DevServer, dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    run_id = new_run_id("noiso")
    spec, files = agent_spec(run_id, tmp_path, agent_env={"AGENT_DIE_AFTER": "4"}, isolation="none")

    result = await _finish(dev_client, task_queue, spec, runs)

    assert (result.outcome, result.restarts) == ("finished", 1)
    assert [entry["key"] for entry in ledger_entries(files.ledger)] == [
        f"{run_id}-step-4",
        f"{run_id}-step-5",
    ]
    status = await api.get_status(dev_client, run_id)
    assert status.isolation is not None
    assert status.isolation.startswith("not isolated (isolation: none)")
    assert await wait_no_agent_processes(run_id) == []
    shown = await asyncio.to_thread(
        subprocess.run,
        [str(OVERNIGHT), "--address", dev_server.address, "status", run_id],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "  sandbox:       not isolated (isolation: none)" in shown.stdout, shown.stderr


async def test_a_bind_missing_on_the_worker_waits_for_a_person_who_can_fix_it(
    dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    run_id = new_run_id("nobind")
    data = tmp_path / "data"
    spec, _ = agent_spec(run_id, tmp_path, binds=[{"path": str(data)}])
    runs.append(run_id)
    await api.start_run(dev_client, spec, task_queue=task_queue)
    waiting = await wait_for_status(dev_client, run_id, lambda s: s.state == "needs_attention")
    assert f"binds: {data} does not exist on this worker" in (waiting.attention_reason or "")

    data.mkdir()
    await api.extend_budget(dev_client, run_id, BudgetExtension(restarts=1))
    result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=60)

    assert (result.outcome, result.attempts) == ("finished", 2)
