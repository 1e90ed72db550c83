"""`overnight reap` on the runtime provider: a terminated run's Runtime sandbox is stopped.

The local provider's case is tests/e2e/test_runs.py; here the sandboxes live behind the
loopback fake Runtime API, and `overnight reap` reaches it with the worker's variables.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import Client

from fakes.runtime import FakeRuntime
from overnight.cli import client as api
from overnight.worker.devserver import DevServer
from tests.e2e.helpers import agent_spec, wait_for_status
from tests.live import in_process_worker, new_run_id, nothing_left_running, running_sandboxes

OVERNIGHT = Path(sys.executable).parent / "overnight"


async def test_reap_stops_the_runtime_sandbox_of_a_terminated_run_and_spares_a_live_one(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    home = tmp_path / "runtime-home"
    with pytest.MonkeyPatch.context() as env:
        async with (
            FakeRuntime.local(home) as fake,
            nothing_left_running(dev_client, [home]) as runs,
        ):
            fake.use(env, tmp_path / "config")
            async with in_process_worker(dev_client, "reap") as queue:
                ids = [new_run_id("orphan"), new_run_id("alive")]
                for run_id in ids:
                    runs.append(run_id)
                    # Each run holds its one sandbox through the test: an agent slow to its
                    # first checkpoint (30 s) met the helper's 10 s stall under load, and the
                    # stalled attempt's sandbox is kept paused for `keep_failed_days` by
                    # design, after the run ends too. No stall and no lease end here.
                    spec, _ = agent_spec(
                        run_id,
                        tmp_path,
                        agent_env={"AGENT_STEP_DELAY": "30"},
                        provider="runtime",
                        stall_seconds=600,
                        sandbox_timeout_seconds=600,
                    )
                    await api.start_run(dev_client, spec, task_queue=queue)
                for run_id in ids:
                    await wait_for_status(dev_client, run_id, lambda s: bool(s.process_id))
                orphan, alive = ids
                await dev_client.get_workflow_handle(orphan).terminate("operator mistake")
                assert running_sandboxes(orphan, home), "a terminated run cannot stop its sandbox"

                reaped = await asyncio.to_thread(
                    subprocess.run,
                    [str(OVERNIGHT), "--address", dev_server.address, "reap", "--json"],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    env=os.environ.copy(),  # RUNTIME_API_URL and _KEY of the fake
                )
                assert reaped.returncode == 0, reaped.stderr
                entries = [e for e in json.loads(reaped.stdout) if e["run_id"] in ids]
                assert [(e["provider"], e["run_id"], e["stopped"]) for e in entries] == [
                    ("runtime", orphan, True)
                ]
                assert running_sandboxes(orphan, home) == []
                assert running_sandboxes(alive, home) != [], "reap must spare a live run"

                await api.cancel_run(dev_client, alive, "test over")
                result = await asyncio.wait_for(api.wait_result(dev_client, alive), timeout=60)
                assert (result.outcome, result.attempts, result.restarts) == ("cancelled", 1, 0)
                assert running_sandboxes(alive, home) == []
