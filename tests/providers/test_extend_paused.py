"""An extension never moves the lease end of a sandbox paused at it (issue #36), on every
provider, through the real extend activity.

The full chaos run saw it: a Runtime sandbox's lease ended as its run extended it; the
extension moved the paused sandbox's end an hour on (a paused sandbox may be extended, and
is not woken by it), so the run's next look found it paused before its lease end, took the
pause for someone else's and restarted a healthy agent, whose last step was then done twice.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from temporalio.testing import ActivityEnvironment

from activities.models import ExtendSandboxInput
from activities.sandbox.activities import SandboxActivities
from tests.live import granted
from tests.providers.conftest import Harness
from tests.providers.test_behaviour import TICKER, new_sandbox, start


async def test_a_sandbox_paused_at_its_lease_end_is_not_extended(provider: Harness) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    await start(provider, sid, TICKER)
    provider.end_lease_in(sid, 0.5)
    await asyncio.sleep(1.0)
    paused = await provider.provider.sandbox(sid)
    assert paused.state == "paused" and paused.lease_ends_at is not None
    assert paused.lease_ends_at <= datetime.now(UTC)

    acts = SandboxActivities(providers={provider.name: provider.provider}, grants=granted())
    until = datetime.now(UTC) + timedelta(minutes=30)
    ask = ExtendSandboxInput(provider=provider.name, sandbox_id=sid, until=until)
    told = await ActivityEnvironment().run(acts.lifecycle.extend_sandbox, ask)

    assert told.state == "paused"
    assert told.lease_ends_at == paused.lease_ends_at  # the end that paused it, as it was
    after = await provider.provider.sandbox(sid)
    assert (after.state, after.lease_ends_at) == ("paused", paused.lease_ends_at)
