"""The minimal agent (examples/minimal_agent/main.py) is the file docs/writing-an-agent.md shows,
and it works: a fresh-context exit after step 1, then the rest, its pull request opened once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from activities.sandbox_base.setup import KIT_DIR
from overnight.demo.outside_world import ledger_url
from overnight.demo.sample_demo import ledger_entries
from tests.waits import CAP

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "examples" / "minimal_agent" / "main.py"


def test_the_docs_show_the_minimal_agent_as_it_is() -> None:
    page = ROOT / "docs" / "writing-an-agent.md"
    assert f"```python\n{AGENT.read_text()}```" in page.read_text()


def test_the_minimal_agent_starts_afresh_once_and_opens_its_pull_request_once(
    tmp_path: Path,
) -> None:
    checkpoint, ledger = tmp_path / "sandbox" / "checkpoint.json", tmp_path / "ledger.jsonl"
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(KIT_DIR),  # as every sandbox has it
        "OVERNIGHT_RUN_ID": "tiny",
        "OVERNIGHT_ATTEMPT": "1",
        "OVERNIGHT_CHECKPOINT": str(checkpoint),
        "OVERNIGHT_LEDGER_URL": ledger_url(ledger),
    }

    def run(reason: str = "") -> int:
        started = {**env, "OVERNIGHT_RESTART_REASON": reason}
        done = subprocess.run([sys.executable, str(AGENT)], env=started, timeout=CAP, check=False)
        return done.returncode

    assert run() == 75
    assert json.loads(checkpoint.read_text())["step"] == 1
    assert run("context window full: fresh start") == 0
    saved = json.loads(checkpoint.read_text())
    assert (saved["step"], saved["next"], saved["done_actions"]) == (3, "done", ["tiny-step-3"])
    assert saved["notes"] == [
        "step 1: read the code",
        "summary: tasks.py is what matters",
        "attempt 1 resumed at step 2: context window full: fresh start",
        "step 2: write the fix",
        "step 3: open the pull request",
    ]
    # Redone after a crash that lost the checkpoint: the key keeps the action single.
    checkpoint.write_text(json.dumps({"step": 2, "fresh": True}))
    assert run("agent crashed (exit 1)") == 0
    assert [entry["key"] for entry in ledger_entries(ledger)] == ["tiny-step-3"]
