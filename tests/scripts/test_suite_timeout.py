"""A test past its timeout costs the suite that test, not the run: with the timeout method
pyproject.toml sets, a timeout that comes while pytest itself is reporting between a test's
phases (where nothing catches what pytest-timeout's signal method raises, an internal error
that ended a whole CI run unsummarized) ends that test's process; xdist names the test, and
the other tests run."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# The report of test_slow_report's call takes 3 s to make: its 1 s timeout comes then.
PLANTED_CONFTEST = """
import time

def pytest_runtest_logreport(report):
    if report.when == "call" and report.nodeid.endswith("test_slow_report"):
        time.sleep(3)
"""
PLANTED_TESTS = "def test_slow_report():\n    pass\n" + "".join(
    f"def test_other_{n}():\n    pass\n" for n in range(8)
)


def timeout_method() -> str:
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())
    method: str = settings["tool"]["pytest"]["ini_options"]["timeout_method"]
    return method


def test_a_timeout_while_pytest_reports_costs_that_test_only(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 1\n")
    (tmp_path / "conftest.py").write_text(PLANTED_CONFTEST)
    (tmp_path / "test_planted.py").write_text(PLANTED_TESTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2"]
        + ["-o", f"timeout_method={timeout_method()}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout + done.stderr
    assert "INTERNALERROR" not in out, out[-3000:]
    assert "crashed while running 'test_planted.py::test_slow_report'" in out, out[-3000:]
    # The 8 others and the slow one's own call passed; its process was lost after.
    assert "1 failed, 9 passed" in out, out[-3000:]
