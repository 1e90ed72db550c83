"""A sandbox that reached its time limit before its create finished does not wedge the run.

Found by the full chaos run: a worker was SIGKILLed while it created sandbox `{run_id}-2` of a
time-limited run. The create is retried only after its heartbeat timeout (60 s); by then the
sandbox had reached its time limit and stopped. Sandbox names are fixed per attempt, so every
retry found the same stopped sandbox: on Runtime the create was retried for an hour
(`start_failed` maps to a retryable `RuntimeUnavailable`), on the local provider it failed at
once (`SandboxNotRunning`) and the run went to `needs_attention`. Either way the run stopped
making progress although its budget had restarts left.

Here the state the retry meets is set up directly: the run's attempt-1 sandbox exists and has
stopped at its time limit. The run must go on in a new sandbox and finish.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.local_engine import LocalEngine
from overnight import client as api
from overnight.constants import LABEL_ATTEMPT, LABEL_RUN
from overnight.home import overnight_home
from tests.fake_runtime import FakeRuntime
from tests.live import in_process_worker, new_run_id, nothing_left_running, scripted_spec


def stopped_at_time_limit(home: Path, run_id: str) -> None:
    """What an interrupted create leaves once the time limit passed: `{run_id}-1`, stopped."""
    engine = LocalEngine(home)
    labels = {LABEL_RUN: run_id, LABEL_ATTEMPT: "1"}
    meta, _ = engine.get_or_create(f"{run_id}-1", labels=labels, timeout_seconds=60)
    engine.stop(meta.id, reason="timeout")


@pytest.mark.parametrize("provider", ["local", "runtime"])
async def test_a_run_whose_sandbox_stopped_during_its_create_goes_on_in_a_new_one(
    dev_client: Client, tmp_path: Path, provider: str
) -> None:
    run_id = new_run_id(f"gone-{provider}")
    spec = scripted_spec(
        run_id, tmp_path, "last-words", provider=provider, env={"AGENT_HOLD": "0.5"}
    )
    runtime_home = tmp_path / "runtime-home"
    with pytest.MonkeyPatch.context() as env:
        async with (
            FakeRuntime.local(runtime_home) as fake,
            nothing_left_running(dev_client, [None, runtime_home]) as runs,
        ):
            fake.use(env, tmp_path / "config")
            stopped_at_time_limit(
                runtime_home if provider == "runtime" else overnight_home(), run_id
            )
            async with in_process_worker(dev_client, "gone") as queue:
                runs.append(run_id)
                await api.start_run(dev_client, spec, task_queue=queue)
                result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=40)

    assert result.outcome == "finished"
    assert result.attempts == 2
