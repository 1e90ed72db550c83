"""A create that meets its sandbox already ended (paused or stopped) does not wedge the run.

Found by the full chaos run: a worker was SIGKILLed while it created sandbox `{run_id}-2` of a
time-limited run. The create is retried only after its heartbeat timeout (60 s); by then the
sandbox had reached its time limit. Sandbox names are fixed per attempt, so every retry met
that same ended sandbox, and the run stopped making progress although its budget had restarts
left.

What the retry meets now depends on how the sandbox ended and on the provider's name rules:

- **paused at its lease end** (what a lease end does now, on both providers): the retried create
  must carry on with it (Runtime's get-or-create wakes a paused holder of the name, with a fresh
  lease) and the run finishes in that sandbox, attempt 1;
- **stopped** (stopped by someone, or an older sandbox made with `onLeaseEnd: "stop"`): on
  Runtime a stopped sandbox gives its name up, so the create makes a new sandbox under the same
  name (attempt 1); a local sandbox keeps its folder and name, so the create fails as
  `SandboxGone` and the run goes on in sandbox 2.

Here the state the retry meets is set up directly, through each provider (for Runtime: the real
SDK against the strict fake, a 60 s lease ended by letting time pass).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Literal

import pytest
from temporalio.client import Client

from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import SandboxProvider, SandboxRequest
from activities.providers.runtime.provider import RuntimeProvider
from activities.sandbox_base.setup import spec_binds
from fakes.runtime import FakeRuntime
from overnight.cli import client as api
from overnight.core.constants import LABEL_ATTEMPT, LABEL_RUN
from overnight.core.home import overnight_home
from overnight.core.models import RunSpec
from tests.live import in_process_worker, new_run_id, nothing_left_running, scripted_spec
from tests.waits import CAP

Ended = Literal["paused", "stopped"]


async def ended_first_sandbox(
    provider: SandboxProvider, engine: LocalEngine, spec: RunSpec, ended: Ended
) -> str:
    """What an interrupted create leaves once the lease passed: `{run_id}-1`, made as the
    create activity makes it, then ended; its id."""
    request = SandboxRequest(
        name=f"{spec.run_id}-1",
        labels={LABEL_RUN: spec.run_id, LABEL_ATTEMPT: "1"},
        timeout_seconds=spec.sandbox_timeout_seconds,
        vcpu=spec.vcpu,
        memory_mib=spec.memory_mib,
        on_lease_end="pause",
        isolation=spec.isolation,
        binds=spec_binds(spec),
    )
    info, created = await provider.get_or_create(request)
    assert created
    if ended == "paused":
        engine.set_lease_end(info.sandbox_id, time.time())  # time passes: the lease ends
    else:
        await provider.stop(info.sandbox_id)
    now = await provider.sandbox(info.sandbox_id)
    assert now.state == ended, now
    return info.sandbox_id


@pytest.mark.parametrize("ended", ["paused", "stopped"])
@pytest.mark.parametrize("provider", ["local", "runtime"])
async def test_a_create_that_meets_its_sandbox_ended_does_not_wedge_the_run(
    dev_client: Client, tmp_path: Path, provider: str, ended: Ended
) -> None:
    run_id = new_run_id(f"gone-{provider}")
    spec = scripted_spec(
        run_id, tmp_path, "last-words", provider=provider, env={"AGENT_HOLD": "0.5"}
    )
    runtime_home = tmp_path / "runtime-home"
    home = runtime_home if provider == "runtime" else overnight_home()
    with pytest.MonkeyPatch.context() as env:
        async with (
            FakeRuntime.local(runtime_home) as fake,
            nothing_left_running(dev_client, [None, runtime_home]) as runs,
        ):
            fake.use(env, tmp_path / "config")
            sandboxes: SandboxProvider = (
                RuntimeProvider() if provider == "runtime" else LocalProvider(LocalEngine(home))
            )
            try:
                first_id = await ended_first_sandbox(sandboxes, LocalEngine(home), spec, ended)
            finally:
                await sandboxes.aclose()
            async with in_process_worker(dev_client, "gone") as queue:
                runs.append(run_id)
                await api.start_run(dev_client, spec, task_queue=queue)
                result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=CAP)
            used = LocalEngine(home).list_sandboxes({LABEL_RUN: run_id}, include_stopped=True)

    assert result.outcome == "finished"
    finished_in = [m.id for m in used if m.id != first_id]
    if ended == "paused":
        # Carried on in the sandbox its create met, woken with a fresh lease.
        assert (result.attempts, result.restarts) == (1, 0)
        assert finished_in == []
    elif provider == "runtime":
        # The stopped sandbox gave its name up: the create made a new one under that name.
        assert (result.attempts, result.restarts) == (1, 0)
        assert len(finished_in) == 1
        assert fake.sandbox_named(f"{run_id}-1") == finished_in[0]
    else:
        # A local sandbox keeps its name when stopped: the run goes on in sandbox 2.
        assert (result.attempts, result.restarts) == (2, 1)
        assert finished_in == [f"{run_id}-2"]
