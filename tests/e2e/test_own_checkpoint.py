"""An agent that saves its checkpoint its own way (`json.dump` and a rename after each of the
kit's calls, and from a thread while one blocks: tests/agents/own_checkpoint), on the real stack
and both providers: its reported model spend is counted and pauses it at the spend budget, its
`wait_until` pauses its sandbox, and its `finish()` results reach the run's result, because the
kit's requests travel in their own file beside the checkpoint, not in the checkpoint.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from fakes.git_http import origin_fields
from overnight.cli import client as api
from overnight.core.models import Budget, BudgetExtension, RunSpec
from overnight.demo.sample_demo import make_origin
from tests.e2e.counting import agent_frozen, until
from tests.e2e.helpers import wait_for_status
from tests.e2e.test_asking import provider_world
from tests.live import new_run_id
from tests.waits import CAP

OWN_WAY_AGENT = Path(__file__).resolve().parent.parent / "agents" / "own_checkpoint"


def own_way_spec(run_id: str, root: Path, provider: str, **changes: Any) -> RunSpec:
    files = make_origin(root / run_id)
    return RunSpec(
        run_id=run_id,
        **origin_fields(files.origin, provider),
        provider=provider,
        agent_dir=str(OWN_WAY_AGENT),
        command="python3 /workspace/agent/main.py",
        poll_seconds=1,
        stall_seconds=60,
        sandbox_timeout_seconds=180,
        **changes,
    )


@pytest.mark.timeout(150)
@pytest.mark.parametrize("provider", ["local", "runtime"])
async def test_spend_reported_by_an_agent_saving_its_own_checkpoint_pauses_it_at_the_budget(
    dev_client: Client, tmp_path: Path, provider: str
) -> None:
    run_id = new_run_id(f"own-spend-{provider[:2]}")
    spec = own_way_spec(
        run_id,
        tmp_path,
        provider,
        env={"AGENT_MODE": "spend", "AGENT_SPEND_USD": "2"},
        budget=Budget(max_spend_usd=1.0),
    )
    async with provider_world(dev_client, provider, tmp_path) as (queue, _, runs):
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        held = await wait_for_status(
            dev_client, run_id, lambda s: s.state in ("needs_attention", "finished"), timeout=60
        )
        assert held.state == "needs_attention", f"the spend was never counted: {held}"
        await until(lambda: agent_frozen(run_id), "the agent frozen by the pause", timeout=CAP)
        await api.extend_budget(dev_client, run_id, BudgetExtension(spend_usd=5))
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=60)

    assert held.attention_reason is not None
    assert held.attention_reason.startswith("spend budget used up")
    assert held.spend_model_usd == pytest.approx(2.0)
    assert held.attempt == 1 and held.process_id is not None  # kept, not set aside
    checkpoint = json.loads(result.checkpoint or "{}")
    assert "overnight" not in checkpoint  # the agent's own, no key of the kit's
    assert [step for step, _ in checkpoint["done_by"]] == list(range(1, 9))
    assert len({pid for _, pid in checkpoint["done_by"]}) == 1
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert result.spend_model_usd == pytest.approx(2.0)
    assert result.outputs is not None and result.outputs.summary == "done its own way"
    assert result.outputs.values["steps"] == "8"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("provider", ["local", "runtime"])
@pytest.mark.long
async def test_a_wait_until_of_an_agent_saving_its_own_checkpoint_pauses_its_sandbox(
    dev_client: Client, tmp_path: Path, provider: str
) -> None:
    run_id = new_run_id(f"own-wait-{provider[:2]}")
    spec = own_way_spec(run_id, tmp_path, provider, env={"AGENT_MODE": "wait"})
    async with provider_world(dev_client, provider, tmp_path) as (queue, _, runs):
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        paused = await wait_for_status(
            dev_client,
            run_id,
            lambda s: s.state == "finished" or (s.talk is not None and s.talk.waiting_until),
            timeout=CAP,
        )
        assert paused.talk is not None and paused.talk.waiting_until, f"never paused: {paused}"
        await until(lambda: agent_frozen(run_id), "the agent frozen by the pause", timeout=CAP)
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=90)

    assert paused.talk.waiting_reason == "w"
    checkpoint = json.loads(result.checkpoint or "{}")
    assert "overnight" not in checkpoint
    # Woken when its time came, the same process went on.
    assert checkpoint["on_time"] is True and checkpoint["waited"] >= 34
    assert checkpoint["pid_after"] == checkpoint["pid_before"]
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert result.outputs is not None and result.outputs.values["pid"] == str(
        checkpoint["pid_before"]
    )
