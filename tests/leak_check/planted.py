"""A test that leaves a sandbox's agent running: run alone by test_leftovers.py (its name is
not a test file's, so the suite does not collect it)."""

from __future__ import annotations

from pathlib import Path

from activities.providers.local.engine import LocalEngine


def test_a_quiet_test_before_it() -> None:
    assert True


def test_leaves_an_agent_running(tmp_path: Path) -> None:
    engine = LocalEngine(tmp_path / "home")
    engine.get_or_create("planted-leak", timeout_seconds=600)
    engine.start_process("planted-leak", "k-1", "sleep 321", cwd="/workspace")


def test_a_quiet_test_after_it() -> None:
    assert True
