"""A retried observe attempt waits only what is left of its window, not the whole window again.

Found by the full chaos run: with a worker SIGKILLed every 20 s, a run whose agent had stalled
was never restarted for the stall. The observe activity is a long poll of `wait_seconds`
(until the stall deadline); each attempt that dies with its worker is retried with the same
input, and waits the whole window again from its own start. An attempt therefore needs a
worker that lives longer than the window; none did, so every attempt ended in a heartbeat
timeout until the retries ran out, and the run was restarted as "sandbox stopped answering"
(a restart charged to the budget for a worker restart) minutes after the stall was due.

Here, with the real activity on a real local sandbox: attempt 2 of an observe first scheduled
65 s ago with a 60 s window must come back at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.testing import ActivityEnvironment

from activities.models import Observation, ObserveInput
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.sandbox.activities import SandboxActivities

WINDOW_SECONDS = 60.0


async def test_a_retried_observe_does_not_wait_its_whole_window_again(tmp_path: Path) -> None:
    engine = LocalEngine(tmp_path / "home")
    sandbox, _ = engine.get_or_create("observe-retry-1", labels={})
    process, _ = engine.start_process(sandbox.id, "observe-retry-1-0", "sleep 60")
    env = ActivityEnvironment()
    first_scheduled = datetime.now(UTC) - timedelta(seconds=WINDOW_SECONDS + 5)
    env.info = dataclasses.replace(
        ActivityEnvironment.default_info(),
        activity_type="observe_agent",
        attempt=2,
        scheduled_time=first_scheduled,
        current_attempt_scheduled_time=datetime.now(UTC),
        started_time=datetime.now(UTC),
        heartbeat_timeout=timedelta(seconds=30),
    )
    activities = SandboxActivities(providers={"local": LocalProvider(engine)})
    try:
        started = time.monotonic()
        seen: Observation = await asyncio.wait_for(
            env.run(
                activities.observe_agent,
                ObserveInput(
                    provider="local",
                    sandbox_id=sandbox.id,
                    process_id=process.process_id,
                    checkpoint_path="/workspace/checkpoint.json",
                    max_checkpoint_bytes=1024,
                    wait_seconds=WINDOW_SECONDS,
                    check_interval_seconds=0.2,
                ),
            ),
            timeout=WINDOW_SECONDS * 2,
        )
        assert seen.process_state == "running"
        # Back at once (a look, well under a second here), not after its 60 s window again.
        assert time.monotonic() - started < 20, "the retry waited its whole window again"
    finally:
        engine.stop(sandbox.id)
