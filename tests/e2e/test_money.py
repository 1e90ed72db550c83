"""What a run costs, on the real stack: the session's dev server, a worker in this process, real
agent processes, and the runtime provider through the real SDK against the strict fake Runtime
API, which bills running sandboxes and keeps the key's daily spending limit.

- Runtime's own charges (`GET /v1/usage`) are what the run's spend counts, not the estimate.
- A create Runtime refuses with 402 `spending_limit_reached` (its price above overnight's
  estimate, so the check before the create let it through) holds the run for the daily window,
  with nothing made; it goes on once there is room.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from fakes.runtime import FakeRuntime, Prices
from overnight.cli import client as api
from overnight.core.models import Budget, BudgetExtension, Rates
from tests.e2e.counting import counting_spec, steps_done, worker_on
from tests.e2e.helpers import wait_for_status
from tests.live import new_run_id, nothing_left_running

# A thousand times overnight's default rates: Runtime's bill and the estimate differ plainly.
DEAR = Prices(vcpu_hour_micros=25_000_000, gib_hour_micros=7_500_000)


@pytest.mark.timeout(120)
async def test_the_spend_of_a_runtime_run_is_what_runtime_charged_its_sandboxes(
    dev_client: Client, tmp_path: Path
) -> None:
    run_id = new_run_id("charged")
    spec, ledger = counting_spec(
        run_id,
        tmp_path,
        "runtime",
        agent_env={"AGENT_STEPS": "3", "AGENT_STEP_SECONDS": "0.5", "AGENT_DIE_AFTER": "2"},
        budget=Budget(max_spend_usd=500, max_restarts=3),
    )
    queue = f"charged-{uuid.uuid4().hex[:8]}"
    runtime_home = tmp_path / "runtime-home"
    with pytest.MonkeyPatch.context() as env:
        async with (
            FakeRuntime.local(runtime_home, prices=DEAR) as fake,
            nothing_left_running(dev_client, [runtime_home]) as runs,
            worker_on(dev_client, queue),
        ):
            fake.use(env, tmp_path / "config")
            runs.append(run_id)
            await api.start_run(dev_client, spec, task_queue=queue)
            result = await api.wait_result(dev_client, run_id)
            status = await api.get_status(dev_client, run_id)
            ids = [r.sandbox_id for r in status.restarts] + [status.sandbox_id]
            boxes = [sid for sid in ids if sid is not None]
            billed = {sid: fake.charged_micros(sid) + fake.held_micros(sid) for sid in boxes}

    assert result.outcome == "finished" and result.restarts == 1
    assert steps_done(ledger) == {1: 1, 2: 2, 3: 1}
    # Both sandboxes ended (paused, then stopped): their final bills, nothing held.
    assert all(billed.values()), billed
    assert status.spend_charged_usd == pytest.approx(sum(billed.values()) / 1e6, abs=1e-4)
    assert status.spend_usd == pytest.approx(status.spend_charged_usd, abs=1e-4)
    assert result.spend_usd == pytest.approx(status.spend_charged_usd, abs=1e-4)
    # The estimate at the spec's rates is about a thousandth of the bill.
    assert status.spend_charged_usd is not None
    assert status.spend_estimated_usd < status.spend_charged_usd / 100


@pytest.mark.timeout(120)
async def test_a_create_refused_402_by_the_daily_limit_holds_the_run_until_there_is_room(
    dev_client: Client, tmp_path: Path
) -> None:
    run_id = new_run_id("daily")
    spec, ledger = counting_spec(
        run_id,
        tmp_path,
        "runtime",
        agent_env={"AGENT_STEPS": "2", "AGENT_STEP_SECONDS": "0.3"},
        # overnight's estimate is far below Runtime's price: its own check lets the create
        # through, and Runtime answers 402 spending_limit_reached.
        rates=Rates(vcpu_hour_usd=0.0001, gib_hour_usd=0.0),
    )
    queue = f"daily-{uuid.uuid4().hex[:8]}"
    runtime_home = tmp_path / "runtime-home"
    with pytest.MonkeyPatch.context() as env:
        async with (
            FakeRuntime.local(runtime_home, prices=DEAR) as fake,
            nothing_left_running(dev_client, [runtime_home]) as runs,
            worker_on(dev_client, queue),
        ):
            fake.use(env, tmp_path / "config")
            fake.set_daily_limit(1_000_000)  # $1: a minute of this sandbox costs ~$1.12
            runs.append(run_id)
            await api.start_run(dev_client, spec, task_queue=queue)
            held = await wait_for_status(
                dev_client, run_id, lambda s: s.state == "needs_attention", timeout=60
            )
            refused = fake.request_count(status=402)
            made = await fake.acall(lambda provider: provider.list({}, include_stopped=True))
            # Room again (the window reopened): a person need not wait for the next look.
            fake.set_daily_limit(None)
            await api.extend_budget(dev_client, run_id, BudgetExtension(hours=1))
            result = await api.wait_result(dev_client, run_id)

    assert refused >= 1
    assert made == []  # refused: nothing made, nothing charged
    assert held.waiting_for_daily_window
    assert "spending_limit_reached" in (held.attention_reason or "") or "daily" in (
        held.attention_reason or ""
    )
    assert held.daily_limit is None or held.daily_limit.limit_usd == 1.0
    assert result.outcome == "finished"
    # Held by the limit, not by a failure: no restart counted, each step done once.
    assert result.restarts == 0
    assert steps_done(ledger) == {1: 1, 2: 1}
