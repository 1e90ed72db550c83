"""The sample agent, run as a real process in a real git repository, with the agent kit on its
PYTHONPATH as every sandbox has it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from activities.sandbox_base.setup import KIT_DIR
from overnight.demo.sample_demo import AGENT_DIR
from tests.waits import CAP

AGENT = AGENT_DIR / "main.py"
FRESH_CONTEXT = 75


@dataclass
class Workspace:
    app: Path
    checkpoint: Path
    ledger: Path
    run_id: str = "agent-test"

    def run(
        self, *flags: str, attempt: int = 1, reason: str = "", **extra: str
    ) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "OVERNIGHT_RUN_ID": self.run_id,
            "OVERNIGHT_ATTEMPT": str(attempt),
            "OVERNIGHT_RESTART_REASON": reason,
            "OVERNIGHT_CHECKPOINT": str(self.checkpoint),
            "OVERNIGHT_LEDGER": str(self.ledger),
            "PYTHONPATH": str(KIT_DIR),
            **extra,
        }
        command = [sys.executable, str(AGENT), "--resume", str(self.checkpoint), *flags]
        return subprocess.run(
            command, cwd=self.app, env=env, capture_output=True, text=True, timeout=CAP
        )

    def checkpoint_data(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.checkpoint.read_text())
        return data

    def ledger_keys(self) -> list[str]:
        if not self.ledger.exists():
            return []
        return [json.loads(line)["key"] for line in self.ledger.read_text().splitlines()]

    def commits(self) -> list[str]:
        log = subprocess.run(
            ["git", "log", "--format=%s"], cwd=self.app, capture_output=True, text=True, check=True
        )
        return log.stdout.splitlines()


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    app = tmp_path / "sandbox" / "app"
    (app / "tests").mkdir(parents=True)
    (app / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (app / "tests" / "test_app.py").write_text(
        "import unittest\nfrom app import add\n\n"
        "class T(unittest.TestCase):\n"
        "    def test_add(self):\n"
        "        self.assertEqual(add(1, 2), 3)\n"
    )
    _git(app, "init", "-q", "-b", "agent/agent-test")
    _git(app, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    _git(app, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "initial")
    return Workspace(
        app=app,
        checkpoint=tmp_path / "sandbox" / "checkpoint.json",
        ledger=tmp_path / "outside" / "ledger.jsonl",
    )


def test_agent_does_five_steps_with_a_checkpoint_and_commit_each(workspace: Workspace) -> None:
    done = workspace.run()
    assert done.returncode == 0, done.stderr
    checkpoint = workspace.checkpoint_data()
    assert checkpoint["step"] == 5
    assert checkpoint["next"] == "done"
    assert checkpoint["done"] == [
        "read the code",
        "write the migration",
        "run the tests",
        "open the pull request",
        "post a summary",
    ]
    assert "step 3: tests passed" in checkpoint["notes"]
    assert workspace.commits()[:5] == [
        "step 5: post a summary",
        "step 4: open the pull request",
        "step 3: run the tests",
        "step 2: write the migration",
        "step 1: read the code",
    ]
    assert workspace.ledger_keys() == ["agent-test-step-4", "agent-test-step-5"]
    assert (workspace.app / "migrations" / "0001_add_due_date.sql").exists()


def test_agent_writes_a_checkpoint_after_every_step(workspace: Workspace) -> None:
    for step in range(1, 5):
        # A fresh-context exit after each step shows the checkpoint as it stood then.
        stopped = workspace.run("--fresh-context-after", str(step))
        assert stopped.returncode == FRESH_CONTEXT, stopped.stderr
        checkpoint = workspace.checkpoint_data()
        assert checkpoint["step"] == step
        assert len(checkpoint["done"]) == step
    assert not list(workspace.checkpoint.parent.glob(".checkpoint-*")), "temp file left behind"


def test_resume_skips_the_steps_the_checkpoint_lists_as_done(workspace: Workspace) -> None:
    workspace.checkpoint.parent.mkdir(parents=True, exist_ok=True)
    workspace.checkpoint.write_text(
        json.dumps(
            {"step": 3, "done": ["a", "b", "c"], "next": "open the pull request", "notes": ["x"]}
        )
    )
    done = workspace.run(attempt=2, reason="agent stalled")
    assert done.returncode == 0, done.stderr
    assert workspace.commits()[:3] == [
        "step 5: post a summary",
        "step 4: open the pull request",
        "initial",
    ]
    notes = workspace.checkpoint_data()["notes"]
    assert notes[0] == "x"
    assert notes[1] == "attempt 2 resumed at step 4: agent stalled"


def test_dying_after_the_pull_request_does_not_open_it_twice(workspace: Workspace) -> None:
    died = workspace.run("--die-after", "4")
    assert died.returncode not in (0, FRESH_CONTEXT)
    # It died after opening the pull request but before recording step 4.
    assert workspace.checkpoint_data()["step"] == 3
    assert workspace.ledger_keys() == ["agent-test-step-4"]

    resumed = workspace.run("--die-after", "4", attempt=2, reason="agent crashed")
    assert resumed.returncode == 0, resumed.stderr
    assert "pull request already open" in resumed.stdout
    assert workspace.ledger_keys() == ["agent-test-step-4", "agent-test-step-5"]
    assert workspace.checkpoint_data()["step"] == 5


def test_fresh_context_exit_happens_once(workspace: Workspace) -> None:
    first = workspace.run("--fresh-context-after", "2")
    assert first.returncode == FRESH_CONTEXT
    again = workspace.run("--fresh-context-after", "2")
    assert again.returncode == 0, again.stderr
    assert workspace.checkpoint_data()["step"] == 5


def test_stall_happens_once_and_hangs_before_the_step(workspace: Workspace, tmp_path: Path) -> None:
    said = tmp_path / "stalled.out"
    with said.open("w") as out:
        stalled = subprocess.Popen(
            [sys.executable, str(AGENT), "--resume", str(workspace.checkpoint), "--stall-at", "2"],
            cwd=workspace.app,
            env={
                **os.environ,
                "OVERNIGHT_RUN_ID": workspace.run_id,
                "OVERNIGHT_CHECKPOINT": str(workspace.checkpoint),
                "OVERNIGHT_LEDGER": str(workspace.ledger),
                "PYTHONPATH": str(KIT_DIR),
            },
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        # Waited for (capped), not timed: a loaded machine may take seconds to reach step 2.
        give_up = time.monotonic() + CAP
        while "stalling at step 2" not in said.read_text():
            assert stalled.poll() is None, said.read_text()
            assert time.monotonic() < give_up, said.read_text()
            time.sleep(0.05)
        time.sleep(0.5)
        assert stalled.poll() is None  # hangs there
    finally:
        stalled.kill()
        stalled.wait()
    assert workspace.checkpoint_data()["step"] == 1
    resumed = workspace.run("--stall-at", "2", attempt=2, reason="agent stalled")
    assert resumed.returncode == 0, resumed.stderr


def test_agent_pushes_each_step_to_origin(workspace: Workspace, tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    _git(tmp_path, "init", "-q", "--bare", str(origin))
    _git(workspace.app, "remote", "add", "origin", str(origin))
    assert workspace.run().returncode == 0
    log = subprocess.run(
        ["git", "log", "--format=%s", "agent/agent-test"],
        cwd=origin,
        capture_output=True,
        text=True,
        check=True,
    )
    assert log.stdout.splitlines()[0] == "step 5: post a summary"


def test_the_checkpoint_is_the_kits_with_the_keys_of_the_outside_actions_done(
    workspace: Workspace,
) -> None:
    assert workspace.run().returncode == 0
    checkpoint = workspace.checkpoint_data()
    assert checkpoint["plan"] == checkpoint["done"]
    assert checkpoint["done_actions"] == ["agent-test-step-4", "agent-test-step-5"]


def test_a_fresh_context_exit_uses_the_runs_code_and_saves_a_summary(
    workspace: Workspace,
) -> None:
    stopped = workspace.run("--fresh-context-after", "3", OVERNIGHT_FRESH_CONTEXT_EXIT_CODE="77")
    assert stopped.returncode == 77, stopped.stderr
    checkpoint = workspace.checkpoint_data()
    assert checkpoint["step"] == 3
    assert checkpoint["notes"][-1].startswith("context full after step 3")
