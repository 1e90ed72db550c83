"""An agent asks a person, on the real stack (the session's dev server, a worker in this
process, real agent processes) on both providers: local sandboxes, and the runtime provider
through the real SDK against the strict fake Runtime API.

The agent (tests/agents/asking, on the agent kit) asks; the run goes to `waiting_for_answer`
and pauses the sandbox (its agent frozen; Runtime bills nothing meanwhile); a refused answer
changes nothing (the stock CLI fails, `overnight answer` exits 2 with a one-line reason); the
stock `temporal workflow update execute --name answer` wakes it, and the same process (the
same pid) goes on with the answer and hands over its results.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from fakes.git_http import origin_fields
from overnight.cli import client as api
from overnight.core.models import Budget, BudgetExtension, RunSpec
from overnight.demo.sample_demo import make_origin
from overnight.worker.devserver import DevServer
from tests.e2e.counting import agent_frozen, until
from tests.e2e.helpers import wait_for_status
from tests.live import new_run_id, provider_world
from tests.waits import CAP

BIN = Path(sys.executable).parent
ASKING_AGENT = Path(__file__).resolve().parent.parent / "agents" / "asking"


async def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, list(argv), capture_output=True, text=True, timeout=60
    )


def asking_spec(run_id: str, root: Path, provider: str, **changes: Any) -> RunSpec:
    files = make_origin(root / run_id)
    return RunSpec(
        run_id=run_id,
        **origin_fields(files.origin, provider),
        provider=provider,
        agent_dir=str(ASKING_AGENT),
        command="python3 /workspace/agent/main.py",
        poll_seconds=1,
        stall_seconds=20,
        sandbox_timeout_seconds=120,
        **changes,
    )


async def listed_state(client: Client, run_id: str, state: str, timeout: float = CAP) -> str | None:
    """The run's `OvernightState` as Temporal visibility lists it (eventually `state`)."""
    deadline = asyncio.get_running_loop().time() + timeout
    found: str | None = None
    while asyncio.get_running_loop().time() < deadline:
        runs = await api.list_runs(client, open_only=True)
        found = next((r.state for r in runs if r.run_id == run_id), None)
        if found == state:
            break
        await asyncio.sleep(0.3)
    return found


@pytest.mark.timeout(150)
@pytest.mark.parametrize("provider", ["local", "runtime"])
async def test_an_agent_asks_its_sandbox_pauses_and_the_stock_cli_answer_wakes_the_same_process(
    dev_server: DevServer, dev_client: Client, tmp_path: Path, provider: str
) -> None:
    run_id = new_run_id(f"ask-{provider[:2]}")
    spec = asking_spec(run_id, tmp_path, provider)
    temporal = [str(BIN / "temporal"), "workflow", "update", "execute", "--name", "answer"]
    where = ["-w", run_id, "--address", dev_server.address, "--namespace", dev_server.namespace]
    async with provider_world(dev_client, provider, tmp_path, "ask") as (queue, fake, runs):
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        waiting = await wait_for_status(
            dev_client, run_id, lambda s: s.state == "waiting_for_answer", timeout=60
        )
        await until(lambda: agent_frozen(run_id), "the agent frozen by the pause", timeout=CAP)
        listed = await listed_state(dev_client, run_id, "waiting_for_answer")
        billed_at_pause = fake.charged_micros(waiting.sandbox_id or "") if fake else 0

        refused = await run_cli(*temporal, *where, "--input", '"maybe"')
        cli = await run_cli(
            str(BIN / "overnight"), "--address", dev_server.address, "answer", run_id, "maybe"
        )
        await asyncio.sleep(1.5)  # paused: Runtime bills nothing for this time
        billed_later = fake.charged_micros(waiting.sandbox_id or "") if fake else 0
        still = await api.get_status(dev_client, run_id)

        accepted = await run_cli(*temporal, *where, "--input", '"yes"')
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=60)
        status = await api.get_status(dev_client, run_id)

    assert waiting.talk is not None and waiting.talk.question == "Apply the migration?"
    assert listed == "waiting_for_answer"  # the OvernightState search attribute
    assert waiting.talk.choices == ["yes", "no"]
    assert refused.returncode != 0 and "one of: yes, no" in refused.stderr + refused.stdout
    assert cli.returncode == 2, cli.stderr
    assert cli.stderr.strip().count("\n") == 0 and "one of: yes, no" in cli.stderr
    assert still.state == "waiting_for_answer"
    assert fake is None or billed_at_pause > 0
    assert billed_later == billed_at_pause
    assert accepted.returncode == 0, accepted.stderr
    checkpoint: dict[str, Any] = json.loads(result.checkpoint or "{}")
    assert checkpoint["answer"] == "yes"
    # The same process asked and went on: no restart, no second start, the same pid.
    assert checkpoint["pid_after"] == checkpoint["pid_before"]
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert status.fresh_starts_used == 0
    assert result.outputs is not None
    assert result.outputs.summary == "asked and answered"
    assert result.outputs.values == {"answer": "yes", "pid": str(checkpoint["pid_before"])}
    assert result.spend_model_usd == pytest.approx(0.25)
    assert result.spend_usd >= 0.25


@pytest.mark.timeout(150)
@pytest.mark.parametrize("provider", ["local", "runtime"])
async def test_model_spend_past_the_budget_pauses_the_agent_and_an_extension_wakes_the_same_one(
    dev_client: Client, tmp_path: Path, provider: str
) -> None:
    run_id = new_run_id(f"spend-{provider[:2]}")
    spec = asking_spec(
        run_id,
        tmp_path,
        provider,
        env={"AGENT_MODE": "spend", "AGENT_SPEND_USD": "2"},
        budget=Budget(max_spend_usd=1.0),
    )
    async with provider_world(dev_client, provider, tmp_path, "ask") as (queue, _, runs):
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        held = await wait_for_status(
            dev_client, run_id, lambda s: s.state == "needs_attention", timeout=60
        )
        await until(lambda: agent_frozen(run_id), "the agent frozen by the pause", timeout=CAP)
        await api.extend_budget(dev_client, run_id, BudgetExtension(spend_usd=5))
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=60)

    assert held.attention_reason is not None
    assert held.attention_reason.startswith("spend budget used up")
    assert held.spend_model_usd == pytest.approx(2.0)
    assert held.attempt == 1 and held.process_id is not None  # kept, not set aside
    done_by = json.loads(result.checkpoint or "{}")["done_by"]
    # Zero steps redone: each of the eight steps done once, all by the same process.
    assert [step for step, _ in done_by] == list(range(1, 9))
    assert len({pid for _, pid in done_by}) == 1
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert result.spend_model_usd == pytest.approx(2.0)
    assert result.spend_usd > 2.0 or provider == "local"
