"""`overnight report` on the real dev server, over real runs of the scripted agent: two that
crashed once and finished, one still going (asked its status), and one that ran out of
restarts and failed (`OutOfBudget`); the sums match what each run's own result says, and each
run's safety-net figure matches its own lost work and setup at its rates."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from overnight.cli import client as api
from overnight.cli.report import collect
from overnight.core.models import Budget
from overnight.worker.devserver import DevServer
from tests.e2e.helpers import wait_for_status
from tests.e2e.test_operator import overnight_cli
from tests.e2e.test_retention import crashing_spec

RATE_PER_HOUR = 0.08  # the default size (2 vCPU, 4 GiB) at the default rates


@pytest.mark.timeout(150)
async def test_report_sums_the_periods_runs_by_outcome_cause_spend_and_safety_net(
    dev_server: DevServer, dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    token = f"rep{uuid.uuid4().hex[:6]}"
    finished = [f"{token}-fin-{n}" for n in range(2)]
    going, failing = f"{token}-open", f"{token}-oob"
    runs.extend([*finished, going, failing])
    specs = [crashing_spec(r, tmp_path) for r in finished]
    # Its second attempt holds quietly: no stall or lease end may restart it (a fourth restart)
    # however long a loaded machine takes to get to the report.
    specs.append(
        crashing_spec(
            going,
            tmp_path,
            env={"AGENT_LATER_HOLD": "600"},
            stall_seconds=1800,
            sandbox_timeout_seconds=1800,
        )
    )
    # No restart allowed and nobody to extend it: out of budget after a few seconds.
    specs.append(
        crashing_spec(failing, tmp_path, budget=Budget(max_restarts=0), attention_hours=0.001)
    )
    await asyncio.gather(*(api.start_run(dev_client, s, task_queue=task_queue) for s in specs))
    results = await asyncio.wait_for(
        asyncio.gather(*(api.wait_result(dev_client, r) for r in finished)), timeout=90
    )
    await wait_for_status(dev_client, going, lambda s: s.attempt == 2 and bool(s.process_id))
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(api.wait_result(dev_client, failing), timeout=60)
    assert isinstance(failed.value.cause, ApplicationError)
    assert failed.value.cause.type == "OutOfBudget"

    for result in results:
        net = result.safety_net
        assert net is not None and net.restarts == 1 and net.by_cause == {"crashed": 1}
        # By hand, from the run's own seconds: (lost + setup) at $0.08 an hour.
        hand = (net.lost_seconds + net.setup_seconds) / 3600 * RATE_PER_HOUR
        assert net.usd == pytest.approx(hand, abs=2e-6)
        assert 0 < net.setup_seconds < 30 and 0 <= net.lost_seconds < 30
        assert net.share == pytest.approx(net.usd / net.sandbox_usd, rel=1e-3, abs=1e-4)
        assert result.checkpoint_json == json.loads(result.checkpoint or "")

    where = f"WorkflowId STARTS_WITH '{token}-'"
    report = await collect(dev_client, timedelta(hours=1), where=where)
    assert report.runs == 4
    assert report.by_outcome == {"finished": 2, "out_of_budget": 1, "running": 1}
    # 1 crash each for the finished and the open run (their causes kept); the failed run's
    # crash was never restarted.
    assert report.restarts == 3
    assert report.restarts_by_cause == {"crashed": 3}
    net_usd = sum(r.safety_net.usd for r in results if r.safety_net)
    assert report.safety_net_usd >= net_usd
    assert report.sandbox_usd >= sum(r.spend_usd for r in results) - 1e-4
    # The failed run has no result: its figures come from its last status, money included.
    assert report.runs_with_spend == 4 and report.runs_with_safety_net == 4
    # The share is the period's safety net over its sandbox spend, both summed over the runs
    # that have the two. No bound below 1 here: these runs last seconds, so on a loaded
    # machine one restart's setup can outlast the rest of a run (a night's run is hours).
    assert report.safety_net_share is not None and report.safety_net_share > 0
    assert report.safety_net_share == pytest.approx(
        report.safety_net_usd / report.sandbox_usd, rel=0.02
    )
    assert report.model_usd == 0 and report.runs_with_model_spend == 0

    # The same through the command, as a person runs it.
    shown = await overnight_cli(dev_server, "report", "--since", "1h", "--where", where, "--json")
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert document["by_outcome"] == report.by_outcome
    text = await overnight_cli(dev_server, "report", "--since", "2h", "--where", where)
    assert text.returncode == 0, text.stderr
    assert "4 run(s) from " in text.stdout
    assert "outcomes:     2 finished, 1 out of budget, 1 running" in text.stdout
    assert "restarts:     3 (3 crashed)" in text.stdout
    bad = await overnight_cli(dev_server, "report", "--since", "seven days")
    assert bad.returncode == 2 and "--since 'seven days'" in bad.stderr
