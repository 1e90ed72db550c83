"""An agent that fills its disk, run by a real worker: where no image holds its limit (a worker
that is not root, or `OVERNIGHT_SANDBOX_DISK=watch`), the worker measures the sandbox, pauses
it past its `disk_mib` and the run needs attention saying so, with no restart: a new sandbox
from the same checkpoint would fill the same way. (The attack itself, in a real bubblewrap
sandbox with and without an image: tests/providers/test_local_disk_limit.py.) And the worker's
floor of free space: below it no sandbox is made, and a running one whose host goes below it
is paused, its run needing attention in place until an extension wakes the same agent."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.providers.local import disk_image, disk_watch, host_floor
from activities.providers.local.disk_limit import DISK_ENV, MIN_FREE_ENV
from activities.providers.local.engine import LocalEngine
from overnight.cli import client as api
from overnight.cli.retrying import retrying_lines
from overnight.core.constants import HOST_FLOOR_PREFIX, LABEL_RUN
from overnight.core.home import HOME_ENV, overnight_home
from overnight.core.models import BudgetExtension
from tests.e2e.counting import worker_on
from tests.e2e.helpers import wait_for_status
from tests.live import new_run_id, nothing_left_running, scripted_spec
from tests.waits import CAP

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


# The worker's home on a filesystem of its own, so the free space is the test's alone.
HOST_MIB, FLOOR_MIB = 320, 200
FILLS_ITS_HOST = """\
echo '{"next": "fill the host"}' > /workspace/checkpoint.json
dd if=/dev/zero of=/workspace/fill bs=1M count=160 conv=fsync 2>/dev/null
echo '{"next": "wait", "notes": ["filled"]}' > /workspace/checkpoint.json
sleep 600
"""


@pytest.fixture
def small_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """`$OVERNIGHT_HOME` on a tmpfs of `HOST_MIB` (the worker in this process uses it)."""
    if os.geteuid() != 0:
        pytest.skip("mounts a small filesystem for the worker's home")
    home = tmp_path / "small-home"
    home.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={HOST_MIB}m", "tmpfs", str(home)], check=True
    )
    monkeypatch.setenv(HOME_ENV, str(home))
    try:
        yield home
    finally:
        for made in ("sandboxes", "sessions"):  # its images (not the tmpfs itself)
            disk_image.detach(home / made)
        subprocess.run(["umount", "-l", str(home)], check=False)


@pytest.mark.timeout(120)
async def test_a_sandbox_taking_its_host_below_the_floor_pauses_and_its_run_needs_attention(
    dev_client: Client, tmp_path: Path, small_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MIN_FREE_ENV, str(FLOOR_MIB))  # 320 MiB free at the create: above it
    monkeypatch.setattr(host_floor, "INTERVAL", 0.2)
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "fill.sh").write_text(FILLS_ITS_HOST)
    run_id = new_run_id("hostfloor")
    spec = scripted_spec(
        run_id,
        tmp_path,
        "unused",
        agent_dir=str(agent),
        command="bash /workspace/agent/fill.sh",
        disk_mib=256,
    )
    queue = f"floor-{uuid.uuid4().hex[:8]}"
    async with nothing_left_running(dev_client, [small_home]) as runs, worker_on(dev_client, queue):
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        held = await wait_for_status(
            dev_client, run_id, lambda s: s.state == "needs_attention", timeout=60
        )
        engine = LocalEngine(small_home)
        (box,) = engine.list_sandboxes({LABEL_RUN: run_id})
        # Room again (here: a lower floor), and a person extends: the same agent goes on.
        monkeypatch.setenv(MIN_FREE_ENV, "16")
        await api.extend_budget(dev_client, run_id, BudgetExtension(hours=1))
        going = await wait_for_status(
            dev_client, run_id, lambda s: s.state == "running", timeout=CAP
        )
        woken = engine.get(box.id)
        await api.cancel_run(dev_client, run_id, reason="floor test done")

    reason = held.attention_reason or ""
    assert reason.startswith(HOST_FLOOR_PREFIX), held
    assert f"floor of {FLOOR_MIB} MiB ({MIN_FREE_ENV})" in reason
    assert held.restarts_used == 0 and held.attempt == 1
    assert box.state == "paused" and (box.pause_reason or "").startswith(HOST_FLOOR_PREFIX)
    # Woken in place: no restart, no new sandbox, the same process.
    assert going.restarts_used == 0 and going.attempt == 1
    assert going.sandbox_id == box.id and going.process_id == held.process_id
    assert woken.state == "running"
