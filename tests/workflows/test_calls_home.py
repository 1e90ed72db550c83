"""Every activity call of the workflows is in `workflows/calls/`: a step module asks one of its
functions, so a call's timeouts, retries and summary are found in one place, and a new step
cannot quietly call an activity with options of its own."""

from __future__ import annotations

import re
from pathlib import Path

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
CALLS = WORKFLOWS / "calls"
# What calling an activity looks like in workflow code: the SDK's four entry points, the
# routed call of `workflows.calls.routing`, and an activity's registered name.
CALLING = re.compile(
    r"\b(execute_activity|start_activity|execute_local_activity|start_local_activity)\b"
    r"|\bon_host\(|\bActivityName\."
)


def calls_outside(root: Path, calls: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if calls in path.parents:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if CALLING.search(line):
                found.append(f"{path.relative_to(root.parent)}:{number}: {line.strip()}")
    return found


def test_activities_are_called_only_from_the_calls_package() -> None:
    assert calls_outside(WORKFLOWS, CALLS) == []
    assert len(list(CALLS.glob("*.py"))) > 5  # the package is where it is said to be


def test_a_call_written_in_a_step_module_is_found(tmp_path: Path) -> None:
    root = tmp_path / "workflows"
    (root / "calls").mkdir(parents=True)
    (root / "calls" / "sandbox.py").write_text("await workflow.execute_activity(x)\n")
    (root / "some_steps.py").write_text("x = 1\nawait workflow.execute_activity(\n")
    assert calls_outside(root, root / "calls") == [
        "workflows/some_steps.py:2: await workflow.execute_activity("
    ]
