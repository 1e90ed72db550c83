"""An agent that fills its disk, run by a real worker: where no image holds its limit (a worker
that is not root, or `OVERNIGHT_SANDBOX_DISK=watch`), the worker measures the sandbox, pauses
it past its `disk_mib` and the run needs attention saying so, with no restart: a new sandbox
from the same checkpoint would fill the same way. (The attack itself, in a real bubblewrap
sandbox with and without an image: tests/providers/test_local_disk_limit.py.)"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.providers.local import disk_watch
from activities.providers.local.disk_limit import DISK_ENV, MIN_FREE_ENV
from activities.providers.local.engine import LocalEngine
from overnight.cli import client as api
from overnight.cli.retrying import retrying_lines
from overnight.constants import LABEL_RUN
from overnight.home import overnight_home
from tests.e2e.counting import worker_on
from tests.e2e.helpers import wait_for_status
from tests.live import new_run_id, nothing_left_running, scripted_spec

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
FILLS_ITS_DISK = """\
echo '{"next": "fill the disk"}' > /workspace/checkpoint.json
fallocate -l 1G /workspace/big || dd if=/dev/zero of=/workspace/big bs=1M count=1024
sleep 600
"""


@pytest.mark.timeout(120)
async def test_an_agent_filling_its_disk_leaves_its_run_needing_attention_with_the_reason(
    dev_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DISK_ENV, "watch")
    monkeypatch.setattr(disk_watch, "MIN_INTERVAL", 0.5)  # not 10 s: a test is short
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "fill.sh").write_text(FILLS_ITS_DISK)
    run_id = new_run_id("disk")
    spec = scripted_spec(
        run_id,
        tmp_path,
        "unused",
        agent_dir=str(agent),
        command="bash /workspace/agent/fill.sh",
        disk_mib=64,
    )
    queue = f"disk-{uuid.uuid4().hex[:8]}"
    async with nothing_left_running(dev_client) as runs, worker_on(dev_client, queue):
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        status = await wait_for_status(
            dev_client, run_id, lambda s: s.state == "needs_attention", timeout=60
        )
        (box,) = LocalEngine(overnight_home()).list_sandboxes({LABEL_RUN: run_id})
        await api.cancel_run(dev_client, run_id, reason="disk test done")

    assert status.attention_reason is not None
    assert status.attention_reason.startswith("disk limit of 64 MiB reached"), status
    assert status.restarts_used == 0 and status.attempt == 1
    assert "disk at most 64 MiB" in (status.isolation or "")
    # Kept for a look, paused (not woken to salvage its checkpoint: it would write on).
    assert box.state == "paused"


@pytest.mark.timeout(120)
async def test_a_worker_below_its_floor_of_free_space_makes_the_run_wait_and_says_why(
    dev_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    free_mib = shutil.disk_usage(overnight_home()).free // 2**20
    monkeypatch.setenv(MIN_FREE_ENV, str(free_mib + 100_000))  # the disk is "full"
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "done.sh").write_text('echo \'{"next": "nothing"}\' > /workspace/checkpoint.json\n')
    run_id = new_run_id("floor")
    spec = scripted_spec(
        run_id, tmp_path, "unused", agent_dir=str(agent), command="bash /workspace/agent/done.sh"
    )
    queue = f"floor-{uuid.uuid4().hex[:8]}"
    async with nothing_left_running(dev_client) as runs, worker_on(dev_client, queue):
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        lines: list[str] = []
        give_up = asyncio.get_running_loop().time() + 30
        while not lines and asyncio.get_running_loop().time() < give_up:
            await asyncio.sleep(0.3)
            lines = await retrying_lines(dev_client, run_id, datetime.now(UTC))
        waiting = await api.get_status(dev_client, run_id)
        monkeypatch.setenv(MIN_FREE_ENV, "0")  # room again: the next try makes the sandbox
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=60)

    assert waiting.state == "starting" and waiting.attempt == 1
    (line,) = lines
    assert line.startswith("  waiting on:    create sandbox, try "), line
    assert "MiB free on the filesystem of" in line and MIN_FREE_ENV in line
    assert result.outcome == "finished" and result.restarts == 0
