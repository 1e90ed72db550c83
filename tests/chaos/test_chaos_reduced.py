"""The reduced chaos run: 5 real runs through 2 worker kills, a window with every worker down
while leases end, lease ends with workers alive, and a Runtime API storm.

Every run must finish with no outside action done twice, no checkpoint lost, no step redone, no
sandbox left running and no restart that a transient fault caused; every sandbox whose lease
ended with no worker alive must have paused (see tests/chaos/harness.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.harness import run_chaos
from tests.chaos.plan import REDUCED
from tests.chaos.verdict import render_table

DEAD_MAN = "every worker SIGKILLed at once (dead man's window)"


# A cap on a hang, past the plan's own cap on the runs (REDUCED.deadline_seconds) and the
# stack's bring-up and tear-down. About a minute on a quiet machine, 107 s on a loaded one.
@pytest.mark.timeout(480)
@pytest.mark.long
@pytest.mark.heavy
async def test_reduced_chaos_loses_nothing_and_leaves_nothing_running(tmp_path: Path) -> None:
    lines: list[str] = []
    report = await run_chaos(REDUCED, tmp_path / "chaos", say=lines.append)
    table = render_table(report)
    explain = "\n".join([table, *report.run_lines(), *report.problems(), *lines])

    figures = report.figures()
    assert figures["finished"] == REDUCED.runs, explain
    assert figures["duplicates"] == 0, explain
    assert figures["missing_actions"] == 0, explain
    assert figures["checkpoints_lost"] == 0, explain
    assert figures["steps_redone"] == 0, explain
    assert figures["left_running"] == 0, explain
    assert figures["transient_restarts"] == 0, explain
    assert report.ok(), explain  # and every run's status was read
    # The dead man's switch: with no worker alive, every lease that ended paused its sandbox.
    assert figures["paused_unwatched"] == figures["lease_ends_unwatched"] > 0, explain
    # Lease ends met with a progressing agent are carried on by that agent (no restart).
    assert figures["lease_resumes"] >= report.agent_faults()["lease_end"][1] > 0, explain
    # The chaos really happened.
    assert report.infra_faults["worker SIGKILL + restart"] == 2, explain
    assert report.infra_faults[DEAD_MAN] == 1, explain
    assert sum(v for k, v in report.infra_faults.items() if k.startswith("Runtime API")) > 0
    assert all(fired > 0 for _, fired in report.agent_faults().values()), explain
