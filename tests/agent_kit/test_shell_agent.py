"""The shell agent (examples/shell_agent/agent.sh): overnight's agent contract in bash, with its
outside actions behind the loopback ledger service, run as a real process in a git repository.
Its checkpoint is the agent kit's JSON, read and written by either."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from activities.sandbox_base.setup import KIT_DIR
from overnight.demo.outside_world import ledger_url
from overnight.demo.sample_demo import ledger_entries
from tests.waits import CAP

sys.path.insert(0, str(KIT_DIR))
import overnight_agent  # noqa: E402  (the kit is a plain file, as agents see it)

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "examples" / "shell_agent" / "agent.sh"
PAGE = ROOT / "docs" / "writing-an-agent.md"
STEPS = [
    "read the code",
    "write the migration",
    "run the tests",
    "open the pull request",
    "post a summary",
]


@dataclass
class Shell:
    app: Path
    checkpoint: Path
    ledger: Path
    url: str
    run_id: str = "shell-test"

    def env(self, attempt: int, reason: str, **extra: str) -> dict[str, str]:
        return {
            "PATH": os.environ["PATH"],  # nothing of overnight's: no PYTHONPATH, no kit
            "HOME": str(self.app.parent),
            "OVERNIGHT_RUN_ID": self.run_id,
            "OVERNIGHT_ATTEMPT": str(attempt),
            "OVERNIGHT_RESTART_REASON": reason,
            "OVERNIGHT_CHECKPOINT": str(self.checkpoint),
            "OVERNIGHT_LEDGER_URL": self.url,
            **extra,
        }

    def run(
        self, attempt: int = 1, reason: str = "", **extra: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(AGENT)],
            cwd=self.app,
            env=self.env(attempt, reason, **extra),
            capture_output=True,
            text=True,
            timeout=60,
        )

    def checkpoint_data(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.checkpoint.read_text())
        return data

    def ledger_keys(self) -> list[str]:
        return [str(entry["key"]) for entry in ledger_entries(self.ledger)]


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout


def _shell(root: Path) -> Shell:
    app = root / "sandbox" / "app"
    (app / "tests").mkdir(parents=True)
    (app / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (app / "tests" / "test_app.py").write_text(
        "import unittest\nfrom app import add\n\n"
        "class T(unittest.TestCase):\n"
        "    def test_add(self):\n"
        "        self.assertEqual(add(1, 2), 3)\n"
    )
    _git(app, "init", "-q", "-b", "agent/shell-test")
    _git(app, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    _git(app, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "initial")
    ledger = root / "outside" / "ledger.jsonl"
    return Shell(app, root / "sandbox" / "checkpoint.json", ledger, ledger_url(ledger))


@pytest.fixture
def shell(tmp_path: Path) -> Shell:
    return _shell(tmp_path)


def test_the_shell_agent_does_five_steps_with_a_checkpoint_the_kit_reads(shell: Shell) -> None:
    done = shell.run()
    assert done.returncode == 0, done.stderr
    saved = shell.checkpoint_data()
    assert (saved["step"], saved["next"], saved["done"], saved["plan"]) == (5, "done", STEPS, STEPS)
    assert "step 3: tests passed" in saved["notes"]
    assert shell.ledger_keys() == ["shell-test-step-4", "shell-test-step-5"]
    assert saved["done_actions"] == shell.ledger_keys()
    assert overnight_agent.Checkpoint.load(str(shell.checkpoint)).to_dict() == saved
    assert _git(shell.app, "log", "--format=%s").splitlines()[:2] == [
        "step 5: post a summary",
        "step 4: open the pull request",
    ]
    assert (shell.app / "migrations" / "0001_add_due_date.sql").exists()
    assert not list(shell.checkpoint.parent.glob(".checkpoint-*")), "temp file left behind"


def test_dying_after_the_pull_request_then_resuming_opens_it_once(shell: Shell) -> None:
    died = shell.run(AGENT_DIE_AFTER="4")
    assert died.returncode == 3, died.stderr
    assert shell.checkpoint_data()["step"] == 3  # step 4 done, its checkpoint not written
    assert shell.ledger_keys() == ["shell-test-step-4"]

    resumed = shell.run(attempt=2, reason="agent crashed (exit 3)", AGENT_DIE_AFTER="4")
    assert resumed.returncode == 0, resumed.stderr
    assert "pull request already open: not reopened" in resumed.stdout
    assert shell.ledger_keys() == ["shell-test-step-4", "shell-test-step-5"]
    assert (
        shell.checkpoint_data()["notes"][3] == "attempt 2 resumed at step 4: agent crashed (exit 3)"
    )


def test_a_ledger_that_does_not_answer_ends_the_attempt_and_the_restart_acts(
    shell: Shell,
) -> None:
    """No answer from the outside world is not "done before": before, the agent took a failed
    call for an action already done, recorded it as done and went on (seen under load, with
    step 4 missing from the ledger of a finished run)."""
    reached = shell.url
    shell.url = "http://127.0.0.1:1/ledgers/nobody"  # refused: curl gives up after its retries
    lost = shell.run()
    assert lost.returncode == 1, lost.stderr
    assert "the ledger did not answer for" in lost.stderr
    saved = shell.checkpoint_data()
    assert (saved["step"], saved["done_actions"]) == (3, [])
    assert shell.ledger_keys() == []

    shell.url = reached
    resumed = shell.run(attempt=2, reason="agent crashed (exit 1)")
    assert resumed.returncode == 0, resumed.stderr
    assert shell.ledger_keys() == ["shell-test-step-4", "shell-test-step-5"]
    assert shell.checkpoint_data()["done_actions"] == shell.ledger_keys()


def test_the_shell_agent_resumes_from_a_checkpoint_the_kit_wrote(shell: Shell) -> None:
    kit = overnight_agent.Checkpoint(str(shell.checkpoint))
    kit.step, kit.next = 3, STEPS[3]
    kit.note('step 3: "quoted" \\ and ünïcode')
    kit.save()
    reason = 'crashed\nwith "a newline"\tand a tab'
    done = shell.run(attempt=2, reason=reason)
    assert done.returncode == 0, done.stderr
    saved = shell.checkpoint_data()  # still JSON, every string escaped
    assert saved["notes"] == [
        'step 3: "quoted" \\ and ünïcode',
        f"attempt 2 resumed at step 4: {reason}",
        "step 4: opened the pull request",
        "step 5: posted the summary",
    ]
    assert _git(shell.app, "log", "--format=%s").splitlines()[2] == "initial"


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", ""])
def test_an_unreadable_checkpoint_starts_over_with_a_note(shell: Shell, content: str) -> None:
    shell.checkpoint.write_text(content)
    assert shell.run().returncode == 0
    notes = shell.checkpoint_data()["notes"]
    assert "starting over" in notes[0] and notes[1].startswith("step 1: ")


def test_a_fresh_context_exit_uses_the_runs_code_once(shell: Shell) -> None:
    first = shell.run(AGENT_FRESH_CONTEXT_AFTER="2", OVERNIGHT_FRESH_CONTEXT_EXIT_CODE="77")
    assert first.returncode == 77, first.stderr
    saved = shell.checkpoint_data()
    assert saved["step"] == 2 and saved["notes"][-1].startswith("context full after step 2")
    again = shell.run(AGENT_FRESH_CONTEXT_AFTER="2", OVERNIGHT_FRESH_CONTEXT_EXIT_CODE="77")
    assert again.returncode == 0, again.stderr
    assert shell.checkpoint_data()["step"] == 5


def test_a_stall_happens_once_and_hangs_before_the_step(shell: Shell) -> None:
    stalled = subprocess.Popen(
        ["bash", str(AGENT)],
        cwd=shell.app,
        env=shell.env(1, "", AGENT_STALL_AT="2"),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert stalled.stdout is not None
    try:
        lines = [stalled.stdout.readline() for _ in range(3)]
        assert lines[-1].startswith("stalling at step 2")
        time.sleep(0.3)
        assert stalled.poll() is None and shell.checkpoint_data()["step"] == 1
    finally:
        os.killpg(stalled.pid, signal.SIGKILL)
        stalled.wait()
        stalled.stdout.close()
    resumed = shell.run(attempt=2, reason="agent stalled", AGENT_STALL_AT="2")
    assert resumed.returncode == 0, resumed.stderr


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(delay=st.floats(min_value=0.0, max_value=0.6))
def test_a_kill_at_any_moment_then_a_restart_does_each_outside_action_once(
    tmp_path_factory: pytest.TempPathFactory, delay: float
) -> None:
    shell = _shell(tmp_path_factory.mktemp("kill"))
    agent = subprocess.Popen(
        ["bash", str(AGENT)],
        cwd=shell.app,
        env=shell.env(1, ""),
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    time.sleep(delay)
    os.killpg(agent.pid, signal.SIGKILL)
    agent.wait()
    if shell.checkpoint.exists():
        step = shell.checkpoint_data()["step"]  # never torn: it parses
        assert 1 <= step <= 5
    left = [p.name for p in shell.checkpoint.parent.glob(".checkpoint-*")]
    assert len(left) <= 1  # at most the temp file being written when it died
    resumed = shell.run(attempt=2, reason="agent crashed (killed)")
    assert resumed.returncode == 0, resumed.stderr
    assert shell.checkpoint_data()["step"] == 5
    assert shell.ledger_keys() == ["shell-test-step-4", "shell-test-step-5"]


def test_the_docs_shell_snippet_resumes_acts_once_and_saves_whole(tmp_path: Path) -> None:
    block = re.search(r"```bash\n(# resume after.*?)```", PAGE.read_text(), re.S)
    assert block is not None
    kit = overnight_agent.Checkpoint(str(tmp_path / "checkpoint.json"))
    kit.step = 3
    kit.save()
    ledger = tmp_path / "ledger.jsonl"
    stub = """checkpoint_json() { printf '{\\n "step": %d\\n}' $((step + 1)); }\n"""
    script = stub + block.group(1)  # the snippet's checkpoint_json: the kit's layout
    env = {
        "PATH": os.environ["PATH"],
        "OVERNIGHT_RUN_ID": "readme",
        "OVERNIGHT_CHECKPOINT": kit.path,
        "OVERNIGHT_LEDGER_URL": ledger_url(ledger),
    }
    for _ in range(2):
        done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, timeout=CAP)
        assert done.returncode == 0, done.stderr
    assert json.loads(Path(kit.path).read_text()) == {"step": 5}  # each run resumed after 3, 4
    assert [entry["key"] for entry in ledger_entries(ledger)] == ["readme-step-4"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json", "ledger.jsonl"]
