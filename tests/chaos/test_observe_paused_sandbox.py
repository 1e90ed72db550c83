"""A look at an agent whose Runtime sandbox paused at its lease end says it is paused.

Found by the chaos harness (a window with every worker SIGKILLed while the leases ended): the
observe held by a dead worker is retried after its heartbeat timeout, when its window has
passed, so it waits 0 s. The runtime provider's watch, given a token and no time to read the
stream, reports the sandbox `running` and the agent alive without having looked. The workflow
then took the agent, frozen since the lease end, for stalled: it restarted it "agent stalled"
(charged to the budget), and the salvage read was refused ("not read: the sandbox is paused"),
so a checkpoint written before the pause and not yet copied would have been lost. The same
happens to any short observe (a quiet look that came back early, an API slower than the wait).

Here, with the real observe activity and the runtime provider through the real SDK against the
strict fake: a watched sandbox's lease ends (time passing), then a retried observe whose window
has passed looks at it. It must see it paused, as the local provider does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities.models import ObserveInput
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import AgentLaunch, SandboxProvider, SandboxRequest
from activities.providers.runtime.provider import RuntimeProvider
from activities.providers.runtime.watch_stream import exit_marker_path
from activities.sandbox.activities import SandboxActivities
from fakes.runtime import FakeRuntime
from tests.waits import CAP

CHECKPOINT = "/workspace/checkpoint.json"
WINDOW_SECONDS = 20.0
# Writes a checkpoint, then keeps working without writing another.
AGENT = f"echo '{{\"step\": 1}}' > {CHECKPOINT}; sleep 120"


def retried(window_passed_seconds: float) -> ActivityEnvironment:
    """An environment for attempt 2 of an observe first scheduled that long ago."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        ActivityEnvironment.default_info(),
        activity_type="observe_agent",
        attempt=2,
        scheduled_time=datetime.now(UTC) - timedelta(seconds=window_passed_seconds),
        current_attempt_scheduled_time=datetime.now(UTC),
        started_time=datetime.now(UTC),
        heartbeat_timeout=timedelta(seconds=30),
    )
    return env


def look(sandbox_id: str, process_id: str, token: str | None, provider: str) -> ObserveInput:
    return ObserveInput(
        provider=provider,
        sandbox_id=sandbox_id,
        process_id=process_id,
        checkpoint_path=CHECKPOINT,
        max_checkpoint_bytes=1024,
        wait_seconds=WINDOW_SECONDS,
        watch_token=token,
        report_every_seconds=1,
    )


@pytest.mark.parametrize(
    "provider",
    [
        "local",
        "runtime",
    ],
)
async def test_a_retried_observe_sees_a_sandbox_paused_at_its_lease_end(
    tmp_path: Path, provider: str
) -> None:
    home = tmp_path / "home"
    engine = LocalEngine(home)
    with pytest.MonkeyPatch.context() as env:
        async with FakeRuntime.local(home) as fake:
            fake.use(env, tmp_path / "config")
            sandboxes: SandboxProvider = (
                RuntimeProvider() if provider == "runtime" else LocalProvider(engine)
            )
            activities = SandboxActivities(providers={provider: sandboxes})
            try:
                info, _ = await sandboxes.get_or_create(
                    SandboxRequest(
                        name="paused-look-1",
                        labels={},
                        timeout_seconds=60,
                        vcpu=1,
                        memory_mib=512,
                    )
                )
                sid = info.sandbox_id
                agent = await sandboxes.start_agent(
                    sid,
                    AgentLaunch(
                        start_key="paused-look-1-0",
                        command=AGENT,
                        cwd="/workspace",
                        exit_marker=exit_marker_path(CHECKPOINT, "paused-look-1-0"),
                    ),
                )
                # Watched (a first look starts the watch and sees the checkpoint).
                first = await ActivityEnvironment().run(
                    activities.observe_agent, look(sid, agent.process_id, None, provider)
                )
                assert first.sandbox_state == "running"
                # Time passes: the lease ends and the sandbox pauses, with nobody watching.
                engine.set_lease_end(sid, time.time() + 0.2)
                deadline = time.monotonic() + CAP
                while engine.get(sid).state != "paused" and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                assert engine.get(sid).state == "paused"
                seen = await asyncio.wait_for(
                    retried(WINDOW_SECONDS + 10).run(
                        activities.observe_agent,
                        look(sid, agent.process_id, first.watch_token, provider),
                    ),
                    timeout=CAP,
                )
            finally:
                await activities.aclose()

    assert (seen.sandbox_state, seen.process_state) == ("paused", "running")
