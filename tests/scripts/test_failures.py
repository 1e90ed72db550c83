"""`scripts/failures.py` names what failed at the end of a run's output, from pytest's JUnit
report: failures, setup errors, and a test process lost to an internal error (which ends a
run before pytest prints its own summary)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PLANTED = """
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("the fixture broke: port 1234 held")

def test_needs_the_fixture(broken):
    pass

def test_one_is_two():
    assert 1 == 2, "one is not two"

def test_fine():
    pass
"""

# A Failed raised in pytest's own wrapper after the test, where nothing catches it: what
# pytest-timeout's signal method did when its alarm came between two phases.
LOST = """
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item):
    yield
    if item.name == "test_fine":
        raise pytest.fail.Exception("Timeout >300.0s")
"""


def run_and_tell(folder: Path) -> str:
    """pytest in two processes over `folder`, then scripts/failures.py on its report."""
    (folder / "pytest.ini").write_text("[pytest]\n")
    report = folder / "report.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2"]
        + [f"--junitxml={report}"],
        cwd=folder,
        env=env,
        capture_output=True,
        timeout=120,
    )
    told = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "failures.py"), str(report)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert told.returncode == 0, told.stderr
    return told.stderr


def test_a_failure_and_a_setup_error_are_named_with_their_why(tmp_path: Path) -> None:
    (tmp_path / "test_planted.py").write_text(PLANTED)
    told = run_and_tell(tmp_path)
    assert "ERROR test_planted::test_needs_the_fixture" in told
    assert "RuntimeError: the fixture broke: port 1234 held" in told
    assert "FAILURE test_planted::test_one_is_two" in told
    assert "AssertionError: one is not two" in told
    assert "test_fine" not in told


def test_a_test_process_lost_to_an_internal_error_is_told(tmp_path: Path) -> None:
    (tmp_path / "test_planted.py").write_text(PLANTED)
    (tmp_path / "conftest.py").write_text(LOST)
    told = run_and_tell(tmp_path)
    assert "internal error" in told
    assert "Failed: Timeout >300.0s" in told


def test_a_run_that_wrote_no_report_says_so(tmp_path: Path) -> None:
    told = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "failures.py"), str(tmp_path / "none.xml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert told.returncode == 0
    assert "no test report" in told.stderr
