"""`python -m bench --quick`, group by group: each benchmark end to end, both systems side by side.

Correctness only: tiny sizes and short polls, so no figure here means anything; the point is
that each benchmark measures both columns and writes its results. One test per group (as
`--only` runs them), so each has pytest's whole timeout and a failure names its benchmark.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bench.run import Options, Outcome, Plan, run_bench
from overnight.worker.devserver import DevServer

# A cap, not a bound: the requests group took 95-119 s in CI's form and 184 s beside other work
# (session 30); the old 240 s cap was too near.
QUICK_BENCH_SECONDS = 420


async def quick_bench(dev_server: DevServer, tmp_path: Path, *groups: str) -> Outcome:
    printed: list[str] = []
    bench = run_bench(
        Options(
            quick=True,
            only=set(groups),
            results_dir=tmp_path / "results",
            address=dev_server.address,
            namespace=dev_server.namespace,
            private_home=False,  # the session's OVERNIGHT_HOME
            state_dir=tmp_path / "state",
        ),
        out=printed.append,
    )
    # Its own bound, under pytest's: cancelled, the bench still stops its workers and
    # sandboxes, where pytest-timeout's would leave them, and a pending task in the session's
    # event loop, for the next tests of this process to meet.
    outcome = await asyncio.wait_for(bench, QUICK_BENCH_SECONDS)
    metrics = [row.metric for row in outcome.rows]
    for row in outcome.rows:
        assert row.group in groups, row.metric
        assert row.overnight is not None, row.metric
        # The key checks run overnight alone; every other row has both columns.
        alone = "concurrent" in row.metric or "one worker watches" in row.metric
        assert alone or row.baseline is not None, row.metric
    written = json.loads(outcome.json_path.read_text())
    assert [row["metric"] for row in written["rows"]] == metrics
    assert written["meta"]["metrics"] == sorted(groups)
    assert "| metric |" in outcome.md_path.read_text()
    assert any("wrote " in line for line in printed)
    return outcome


def has_rows(outcome: Outcome, *expected: str) -> None:
    metrics = [row.metric for row in outcome.rows]
    for metric in expected:
        assert metric in metrics


@pytest.mark.timeout(QUICK_BENCH_SECONDS + 120)
@pytest.mark.long
@pytest.mark.heavy
async def test_quick_crash_recovery_and_history(dev_server: DevServer, tmp_path: Path) -> None:
    outcome = await quick_bench(dev_server, tmp_path, "crash", "recovery", "history")
    has_rows(
        outcome,
        "crash-to-noticed, median",
        "recovery overhead beyond provider create+clone, median",
        "billable actions / supervised hour",
        "crash-to-noticed on runtime, median",
    )
    assert outcome.details["crash"]["incomplete_samples"] == []
    assert outcome.details["runtime_crash"]["incomplete_samples"] == []
    assert outcome.details["history"]["overnight"]["events"] > 0


@pytest.mark.timeout(QUICK_BENCH_SECONDS + 120)
@pytest.mark.long
@pytest.mark.heavy
async def test_quick_scale(dev_server: DevServer, tmp_path: Path) -> None:
    outcome = await quick_bench(dev_server, tmp_path, "scale")
    has_rows(outcome, "scale: most runs on one worker with tick lag p99 <= 2 s")
    overnight_scale = outcome.details["scale"]["overnight"]["levels"][0]
    assert overnight_scale["all_started"] and overnight_scale["lag"]["n"] > 0


@pytest.mark.timeout(QUICK_BENCH_SECONDS + 120)
@pytest.mark.long
@pytest.mark.heavy
async def test_quick_provider_requests_and_key_limits(
    dev_server: DevServer, tmp_path: Path
) -> None:
    outcome = await quick_bench(dev_server, tmp_path, "requests")
    key = Plan.quick().key
    has_rows(
        outcome,
        "runtime requests / run-hour, quiet agent",
        "local checkpoint reads / run-hour, quiet agent",
        "runtime runs one key sustains under 50 req/s (from the measured rate)",
        f"{key.runs} concurrent runtime runs on one key ({key.workers} workers): 429 answers",
    )
    cells = outcome.details["requests"]["cells"]
    for system in ("overnight", "baseline"):
        assert cells[f"{system}/runtime/ticking"]["requests_per_hour"] > 0
        assert cells[f"{system}/local/ticking"]["read_per_hour"] > 0
    assert outcome.details["key_limit"]["late_runs"] == []


@pytest.mark.timeout(QUICK_BENCH_SECONDS + 120)
@pytest.mark.long
@pytest.mark.heavy
async def test_quick_runtime_fleet(dev_server: DevServer, tmp_path: Path) -> None:
    outcome = await quick_bench(dev_server, tmp_path, "fleet")
    fleet_plan = Plan.quick().fleet
    has_rows(
        outcome,
        f"{fleet_plan.runs} concurrent runtime runs on one key ({fleet_plan.workers} workers): "
        "watch streams held at once, most",
    )
    fleet = outcome.details["fleet"]
    assert fleet["crash_missing"] == 0 and fleet["streams_held_most"] <= fleet["ceiling"]
