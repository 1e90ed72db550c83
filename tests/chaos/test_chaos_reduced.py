"""The reduced chaos run: 5 real runs through 2 worker kills and a Runtime API storm.

Every run must finish with no outside action done twice, no checkpoint lost, no sandbox left
running and no restart that a transient fault caused (see tests/chaos/harness.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.chaos.harness import run_chaos
from tests.chaos.plan import REDUCED
from tests.chaos.verdict import render_table


@pytest.mark.timeout(240)
async def test_reduced_chaos_loses_nothing_and_leaves_nothing_running(tmp_path: Path) -> None:
    lines: list[str] = []
    started = time.monotonic()
    report = await run_chaos(REDUCED, tmp_path / "chaos", say=lines.append)
    table = render_table(report)
    explain = "\n".join([table, *report.problems(), *lines])

    figures = report.figures()
    assert figures["finished"] == REDUCED.runs, explain
    assert figures["duplicates"] == 0, explain
    assert figures["missing_actions"] == 0, explain
    assert figures["checkpoints_lost"] == 0, explain
    assert figures["left_running"] == 0, explain
    assert figures["transient_restarts"] == 0, explain
    # The chaos really happened.
    assert report.infra_faults["worker SIGKILL + restart"] == 2, explain
    assert sum(v for k, v in report.infra_faults.items() if k.startswith("Runtime API")) > 0
    assert all(fired > 0 for _, fired in report.agent_faults().values()), explain
    assert time.monotonic() - started < 180, explain
