"""What the safety net cost, on the time-skipping server: a stalled agent's restart costs the
15 minutes it sat stuck since its checkpoint (the work thrown away) plus the setup of the next
sandbox, at the run's rates; the result, the status and the card say so, matching a sum done
by hand. The result also carries the final checkpoint parsed, beside its text.

The history `safety_net` is recorded from the first test (behind `SAFETY_NET_PATCH`).
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from fakes.activities import FakeWorld, exits, note, progress
from tests.workflows.harness import (
    eventually,
    keep_history,
    make_spec,
    started_run,
    status_of,
)
from tests.workflows.test_agent_run_retention import _markers
from workflows.patches import SAFETY_NET_PATCH

# 2 vCPU x $0.025 + 4 GiB x $0.0075 an hour: the default size at the default rates.
RATE_PER_HOUR = 0.08


async def test_a_stalls_restart_costs_its_lost_15_minutes_at_the_runs_rates(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    final = note("done", "step 1", "step 2")
    world.script(1, [progress(note("step 2", "step 1"))])  # then stuck in a loop
    world.script(2, [progress(final), exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        await eventually(lambda: status_of(handle), lambda s: s.checkpoint_bytes > 0)
        await time_skipping_env.sleep(timedelta(minutes=16))
        await eventually(lambda: status_of(handle), lambda s: s.attempt == 2)
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        result = await handle.result()
        status = await status_of(handle)
        markers = await _markers(handle)
        await keep_history(handle, "safety_net")

    assert SAFETY_NET_PATCH in markers
    net = result.safety_net
    assert net is not None and net.restarts == 1 and net.by_cause == {"stalled": 1}
    # By hand: the stall threshold (900 s) of sandbox time lost, and a setup of the fakes'
    # few milliseconds, at $0.08 an hour: $0.02.
    assert 899.9 < net.lost_seconds < 902  # (900 as a float difference may be a hair under)
    assert 0 <= net.setup_seconds < 2
    assert net.usd == pytest.approx(900 / 3600 * RATE_PER_HOUR, abs=0.0001)
    assert net.sandbox_usd == pytest.approx(result.spend_usd, abs=0.0001)
    assert net.share == pytest.approx(net.usd / net.sandbox_usd, abs=0.001)
    [cost] = net.recent
    assert (cost.attempt, cost.reason) == (2, "agent stalled 15 min")
    assert status.safety_net == net
    # The card, while attempt 2 ran: "$0.0200 (...% of the sandbox cost): 1 restart(s) ...".
    card = metadata.current_details
    assert "- **safety net** $0.0200 (" in card
    assert "1 restart(s) (1 stalled), 900 s of work lost" in card
    # The checkpoint, parsed beside its text.
    assert result.checkpoint == final
    assert result.checkpoint_json == json.loads(final)


async def test_a_run_without_restarts_costs_no_safety_net_and_a_text_checkpoint_stays_text(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("plain text, not JSON"), exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()
    assert result.safety_net is not None and result.safety_net.restarts == 0
    assert result.safety_net.usd == 0
    assert (result.checkpoint, result.checkpoint_json) == ("plain text, not JSON", None)
