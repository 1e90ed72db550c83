"""The agent kit (`overnight_agent`): atomic checkpoints whatever kills the agent, action keys
fixed per step, the fresh-context exit, and nothing newer than Python 3.8."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from activities.sandbox_base.setup import KIT_DIR
from tests.waits import CAP

# The kit: overnight_agent.py and its siblings (overnight_agent_requests.py, ...).
KIT = sorted(KIT_DIR.glob("overnight_agent*.py"))
sys.path.insert(0, str(KIT_DIR))
import overnight_agent  # noqa: E402  (the kit is a plain file, as agents see it)

# Saves versions 1, 2, 3... as fast as it can, each large enough that a write takes a while,
# each carrying a payload that says which version it is.
SAVER = """
import sys
from overnight_agent import Checkpoint
cp = Checkpoint.load(sys.argv[1])
for version in range(1, 100000):
    cp.step = version
    cp.data["payload"] = str(version) * 20000
    cp.save()
    print(version, flush=True)
"""


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(KIT_DIR), **extra}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(delay=st.floats(min_value=0.0, max_value=0.15))
def test_a_kill_at_any_moment_of_save_leaves_a_whole_checkpoint(
    tmp_path_factory: pytest.TempPathFactory, delay: float
) -> None:
    folder = tmp_path_factory.mktemp("kill")
    path = folder / "checkpoint.json"
    saver = subprocess.Popen(
        [sys.executable, "-c", SAVER, str(path)], env=_env(), stdout=subprocess.PIPE, text=True
    )
    assert saver.stdout is not None
    saver.stdout.readline()  # version 1 is saved
    time.sleep(delay)
    saver.send_signal(signal.SIGKILL)
    saver.wait()
    saver.stdout.close()
    saved = json.loads(path.read_text())  # never torn: it parses
    assert saved["payload"] == str(saved["step"]) * 20000
    left = [p.name for p in folder.iterdir() if p.name != "checkpoint.json"]
    assert len(left) <= 1  # at most the one temp file being written when it died


def test_a_failed_save_keeps_the_previous_checkpoint_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "checkpoint.json"
    first = overnight_agent.Checkpoint(str(path))
    first.next = "step 2"
    first.save()

    def disk_full(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    second = overnight_agent.Checkpoint.load(str(path))
    second.next = "step 3"
    with pytest.raises(OSError):
        second.save()
    assert json.loads(path.read_text())["next"] == "step 2"
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.json"]


def test_action_keys_are_fixed_per_step_across_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OVERNIGHT_RUN_ID", "fix-42")
    keys = []
    for attempt in ("1", "2"):
        monkeypatch.setenv("OVERNIGHT_ATTEMPT", attempt)
        cp = overnight_agent.Checkpoint("/nowhere", {"step": 3})
        keys.append((cp.action_key(), cp.action_key(7)))
    assert keys == [("fix-42-step-4", "fix-42-step-7")] * 2


def test_a_checkpoint_round_trips_with_the_agents_own_keys(tmp_path: Path) -> None:
    cp = overnight_agent.Checkpoint(str(tmp_path / "state" / "cp.json"))
    cp.step, cp.plan, cp.next = 2, ["a", "b", "c"], "c"
    cp.note("b done")
    cp.mark_done("r-step-2")
    cp.mark_done("r-step-2")
    cp.data["branch_sha"] = "abc123"
    cp.save()
    again = overnight_agent.Checkpoint.load(cp.path)
    assert again.to_dict() == cp.to_dict()
    assert again.done("r-step-2") and again.done_actions == ["r-step-2"]


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", ""])
def test_an_unreadable_checkpoint_starts_over_with_a_note(tmp_path: Path, content: str) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_text(content)
    cp = overnight_agent.Checkpoint.load(str(path))
    assert cp.step == 0 and len(cp.notes) == 1 and "starting over" in cp.notes[0]


def test_fresh_context_saves_the_summary_and_exits_with_the_runs_code(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    script = (
        "from overnight_agent import Checkpoint, fresh_context\n"
        "cp = Checkpoint.load()\ncp.step = 4\nfresh_context('summarised steps 1-4', cp)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=_env(OVERNIGHT_CHECKPOINT=str(path), OVERNIGHT_FRESH_CONTEXT_EXIT_CODE="77"),
        check=False,
    )
    assert done.returncode == 77
    saved = json.loads(path.read_text())
    assert (saved["step"], saved["notes"]) == (4, ["summarised steps 1-4"])


@pytest.mark.parametrize("module", KIT, ids=lambda path: path.stem)
def test_the_kit_is_python_3_8_and_standard_library_only(module: Path) -> None:
    tree = ast.parse(module.read_text(), feature_version=(3, 8))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []  # overnight's own import of the kit, as overnight.agent_kit.*
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (
            node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
        )
    }
    allowed = {
        "__future__",
        "datetime",
        "hashlib",
        "json",
        "os",
        "sys",
        "tempfile",
        "time",
        "typing",
        *(path.stem for path in KIT),
    }
    assert imported <= allowed, imported


def test_snapshot_here_asks_through_the_checkpoint_and_waits_for_the_answer(
    tmp_path: Path,
) -> None:
    """The request is the checkpoint's `snapshot_request` (one more each time); the call
    returns once the supervisor's answer names that request."""
    path = tmp_path / "checkpoint.json"
    answer = tmp_path / "snapshot.json"
    # The agent waits for its answer longer than the test waits for its request (CAP).
    script = (
        "import json, overnight_agent as k\n"
        "cp = k.Checkpoint.load(); cp.step = 3; cp.save()\n"
        "print(json.dumps(k.snapshot_here(cp, timeout=200, poll=0.05)))\n"
    )
    env = _env(
        OVERNIGHT_CHECKPOINT=str(path),
        OVERNIGHT_RECOVERY="snapshot",
        OVERNIGHT_SNAPSHOT_ANSWER=str(answer),
    )
    agent = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True
    )
    give_up = time.monotonic() + CAP
    while time.monotonic() < give_up:
        if path.exists() and json.loads(path.read_text()).get("snapshot_request") == 1:
            break
        time.sleep(0.05)
    assert json.loads(path.read_text())["step"] == 3
    assert agent.poll() is None  # waiting for the snapshot
    answer.write_text(json.dumps({"request": 1, "state": "ready", "snapshot_id": "snap-1"}))
    out, _ = agent.communicate(timeout=CAP)
    assert json.loads(out) == {"request": 1, "state": "ready", "snapshot_id": "snap-1"}


def test_snapshot_here_returns_at_once_without_snapshot_recovery(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    # Told to wait far past the cap below: a call that waited would fail it, not return None.
    script = "import overnight_agent as k; print(k.snapshot_here(timeout=3600))"
    out = subprocess.run(
        [sys.executable, "-c", script],
        env=_env(OVERNIGHT_CHECKPOINT=str(path)),
        capture_output=True,
        text=True,
        timeout=CAP,
    )
    assert out.stdout.strip() == "None" and not path.exists()


def test_a_failing_ci_check_is_told_as_a_done_check_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from overnight.agent_kit import overnight_agent as kit
    from overnight.core.ci_rounds import CI_CHECK_REASON

    told = tmp_path / "done-check.txt"
    told.write_text("check: tests\n\nlog (its end):\nFAILED test_due\n")
    monkeypatch.setenv("OVERNIGHT_DONE_CHECK_FILE", str(told))
    monkeypatch.setenv("OVERNIGHT_RESTART_REASON", f"{CI_CHECK_REASON} (round 1): tests (failure)")
    assert kit.CI_CHECK_REASON == CI_CHECK_REASON
    assert kit.done_check_failure() == told.read_text().strip()
    monkeypatch.setenv("OVERNIGHT_RESTART_REASON", "agent crashed (exit 1)")
    assert kit.done_check_failure() is None
