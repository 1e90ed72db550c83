"""A stall is seen coming (issue 51), end to end: the real dev server, a worker in this
process, a real bubblewrap sandbox whose agent prints a line every half second and never
writes a checkpoint (output is not progress).

Past half its `stall_seconds`, `overnight status` says "no checkpoint for N s: stalls at 40 s"
(the Web UI card says it too for thresholds of 10 min and more, which wake the run at their
half: tests/workflows/test_agent_run_stall_seen.py); the stall restart comes; and in the new
sandbox `last progress` is still `never`, the agent having made none. On the code before,
nothing said the stall was coming (`last progress: 13s ago` only, counted from the sandbox's
start), and after the restart `last progress` said seconds ago again.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime
from pathlib import Path

from temporalio.client import Client

from overnight.cli import client as api
from overnight.worker.devserver import DevServer
from tests.e2e.test_cli_live import overnight
from tests.live import in_process_worker, new_run_id, nothing_left_running, scripted_spec

# Long enough that a loaded machine's `overnight status` (a few seconds) lands in the second
# half of it.
STALL_SECONDS = 40
# Prints, never checkpoints.
CHATTY = "while true; do echo still working; sleep 0.5; done"
SAID = re.compile(rf"no checkpoint for (\d+) s: stalls at {STALL_SECONDS} s")


async def past_half(client: Client, run_id: str, cap: float) -> None:
    """Until the running agent's stall clock is past its half (read in this process, quickly:
    the CLI is asked then, once)."""
    give_up = time.monotonic() + cap
    while time.monotonic() < give_up:
        status = await api.get_status(client, run_id)
        if status.state == "running" and status.stalls_at is not None:
            left = (status.stalls_at - datetime.now(UTC)).total_seconds()
            if left < STALL_SECONDS / 2 - 1:
                return
        await asyncio.sleep(0.5)
    raise AssertionError(f"{run_id} never ran past half its stall threshold")


def line_of(text: str, start: str) -> str:
    return next((line for line in text.splitlines() if line.startswith(start)), "")


async def test_a_quiet_agent_is_told_stalling_before_its_restart_and_never_progressed(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    run_id = new_run_id("stall-seen")
    spec = scripted_spec(run_id, tmp_path, "steps", command=CHATTY, stall_seconds=STALL_SECONDS)
    async with (
        nothing_left_running(dev_client) as runs,
        in_process_worker(dev_client, "stall-seen") as queue,
    ):
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        await past_half(dev_client, run_id, cap=180)
        shown = (await overnight(dev_server, "status", run_id)).stdout
        watch = line_of(shown, "  stall watch:")
        said = SAID.search(watch)
        assert said, shown
        assert STALL_SECONDS / 2 <= int(said.group(1)) <= STALL_SECONDS, watch
        assert line_of(shown, "  last progress:") == "  last progress: never", shown
        # The stall restart comes, and the new sandbox's agent has made no progress either.
        status = await api.get_status(dev_client, run_id)
        give_up = time.monotonic() + 180
        while (status.attempt < 2 or status.state != "running") and time.monotonic() < give_up:
            await asyncio.sleep(0.5)
            status = await api.get_status(dev_client, run_id)
        shown = (await overnight(dev_server, "status", run_id)).stdout
    assert status.attempt >= 2 and status.state == "running", status
    assert status.restarts and all(r.reason.startswith("agent stalled") for r in status.restarts), (
        status.restarts
    )
    assert status.last_progress_at is None, status.last_progress_at
    assert line_of(shown, "  last progress:") == "  last progress: never", shown
