"""A checkpoint the agent wrote before its Runtime sandbox's lease ended is not lost.

Found by the chaos harness: a runtime-provider run whose worker was SIGKILLed (or whose Runtime
API was slow) around the moment its sandbox reached its time limit redid checkpointed steps or
finished with an older checkpoint than the agent's last one: sandboxes were created with
`onLeaseEnd: "stop"`, which ends the sandbox and its disk, so a checkpoint written after the
last copy was gone. Sandboxes now pause at their lease end (memory and files kept), and the
checkpoint is salvaged from the paused sandbox.

Here, deterministically and within the real API's rules (a 60 s lease, the shortest Runtime
accepts; time passes through `fake.end_lease_in`): the agent checkpoints step 1 (copied), the
Runtime API stops answering for that sandbox, the agent checkpoints steps 2 and 3 and exits 0,
the lease ends, the API answers again. The run must finish in its first sandbox with every
step done there once: with `onLeaseEnd: "stop"` the last two checkpoints are lost and a second
sandbox redoes steps 2 and 3.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.providers.local.engine import LocalEngine
from fakes.runtime import FakeRuntime
from overnight.cli import client as api
from tests.e2e.helpers import wait_for_status
from tests.live import in_process_worker, new_run_id, nothing_left_running, scripted_spec
from tests.waits import CAP

LEASE_SECONDS = 60  # Runtime's shortest lease
STEP_SECONDS = 1.5


@pytest.mark.timeout(120)
async def test_final_checkpoint_survives_a_lease_end_reached_while_runtime_was_silent(
    dev_client: Client, tmp_path: Path
) -> None:
    home = tmp_path / "runtime-home"
    engine = LocalEngine(home)
    run_id = new_run_id("lastwords")
    spec = scripted_spec(
        run_id,
        tmp_path,
        "steps",
        provider="runtime",
        sandbox_timeout_seconds=LEASE_SECONDS,
        env={"AGENT_HOLD": str(STEP_SECONDS)},
    )
    with pytest.MonkeyPatch.context() as env:
        async with (
            FakeRuntime.local(home) as fake,
            nothing_left_running(dev_client, [home]) as runs,
        ):
            fake.use(env, tmp_path / "config")
            async with in_process_worker(dev_client, "lastwords") as queue:
                runs.append(run_id)
                await api.start_run(dev_client, spec, task_queue=queue)
                first = await wait_for_status(
                    dev_client,
                    run_id,
                    lambda s: (
                        s.checkpoint_summary is not None and s.checkpoint_summary.next == "step 2"
                    ),
                    timeout=CAP,
                )
                sandbox_id = first.sandbox_id
                assert sandbox_id is not None
                fake.stop_answering(sandbox_id)
                # The agent checkpoints steps 2 and 3 and exits while nobody can copy them.
                await _until(lambda: _step(engine, sandbox_id) == 3, "the agent's last step")
                fake.end_lease_in(sandbox_id, 0.5)
                await _until(
                    lambda: _state(engine, sandbox_id) in ("paused", "stopped"), "the lease end"
                )
                ended_as = _state(engine, sandbox_id)
                fake.resume_answering(sandbox_id)
                result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=60)
                status = await api.get_status(dev_client, run_id)

    assert result.outcome == "finished"
    final = json.loads(result.checkpoint or "{}")
    assert final.get("notes") == [f"step {n} in attempt 1" for n in (1, 2, 3)], result.checkpoint
    assert (result.attempts, result.restarts) == (1, 0), status.restarts
    assert ended_as == "paused"


def _step(engine: LocalEngine, sandbox_id: str) -> int | None:
    try:
        text = engine.host_path(sandbox_id, "/workspace/checkpoint.json").read_text()
        step = json.loads(text).get("step")
    except (OSError, ValueError):
        return None
    return step if isinstance(step, int) else None


def _state(engine: LocalEngine, sandbox_id: str) -> str | None:
    meta = engine.find(sandbox_id)
    return None if meta is None else meta.state


async def _until(condition: Callable[[], bool], what: str, timeout: float = CAP) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await asyncio.to_thread(condition):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what} did not come in {timeout}s")
