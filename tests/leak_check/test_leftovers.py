"""The suite's last look: a test process that ends with something it started still running
fails, naming the test that started it, and kills it (tests/leftovers.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.leftovers import Timeline, processes

PLANTED = Path(__file__).with_name("planted.py")
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_a_session_that_leaves_an_agent_running_fails_naming_its_test(tmp_path: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(PLANTED)]
        + ["--basetemp", str(tmp_path / "planted")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = ran.stdout + ran.stderr

    assert ran.returncode == 1, said
    assert "3 passed, 1 error" in said, said
    assert "still ran at its end (now killed)" in said
    named = said[said.index("still ran at its end") : said.index("short test summary")]
    assert "planted.py::test_leaves_an_agent_running:" in named
    assert "sleep 321" in named and "launcher.py" in named
    assert "test_a_quiet_test" not in named
    assert [p for p in processes().values() if str(tmp_path) in p.command] == []


def test_a_process_is_put_to_the_test_running_when_it_started() -> None:
    timeline = Timeline()
    assert timeline.test_at(5.0) == "(before the first test)"
    timeline.began("a", at=10.0)
    timeline.began("b", at=20.0)

    assert [timeline.test_at(t) for t in (9.9, 10.0, 19.9, 20.0, 99.0)] == [
        "(before the first test)",
        "a",
        "a",
        "b",
        "b",
    ]
