"""A test past its timeout costs the suite that test, not the run: with the timeout method
pyproject.toml sets, a timeout that comes while pytest itself is reporting between a test's
phases (where nothing catches what pytest-timeout's signal method raises, an internal error
that ended a whole CI run unsummarized) ends that test's process; xdist names the test, and
the other tests run. They run under the suite's own scheduling (`--dist loadgroup` with
tests/xdist_scheduling.py): xdist's, after a lost process, hung a CI run for 90 minutes."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# The report of test_slow_report's call takes 3 s to make: its 1 s timeout comes then.
# The suite's scheduler, as tests/conftest.py plugs it in.
SUITE_SCHEDULER = """
from tests.xdist_scheduling import make_scheduler

def pytest_xdist_make_scheduler(config, log):
    return make_scheduler(config, log)
"""
PLANTED_CONFTEST = (
    SUITE_SCHEDULER
    + """
import time

def pytest_runtest_logreport(report):
    if report.when == "call" and report.nodeid.endswith("test_slow_report"):
        time.sleep(3)
"""
)
PLANTED_TESTS = "def test_slow_report():\n    pass\n" + "".join(
    f"def test_other_{n}():\n    pass\n" for n in range(8)
)


def timeout_method() -> str:
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())
    method: str = settings["tool"]["pytest"]["ini_options"]["timeout_method"]
    return method


def run_planted(folder: Path, processes: int) -> str:
    """pytest's output for the planted tests in `folder`, run as scripts/test runs the suite:
    `processes` test processes, `--dist loadgroup`, pyproject.toml's timeout method, a 1 s
    timeout. A run that hangs fails at the cap."""
    (folder / "pytest.ini").write_text("[pytest]\ntimeout = 1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(REPO)  # the planted conftest imports the suite's scheduler
    env["COLUMNS"] = "200"  # summary lines whole, as on a wide terminal or in CI
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
        + ["-n", str(processes), "--dist", "loadgroup"]
        + ["-o", f"timeout_method={timeout_method()}"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout + done.stderr


def test_a_timeout_while_pytest_reports_costs_that_test_only(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(PLANTED_CONFTEST)
    (tmp_path / "test_planted.py").write_text(PLANTED_TESTS)
    out = run_planted(tmp_path, processes=2)
    assert "INTERNALERROR" not in out, out[-3000:]
    assert "crashed while running 'test_planted.py::test_slow_report'" in out, out[-3000:]
    # The 8 others and the slow one's own call passed; its process was lost after.
    assert "1 failed, 9 passed" in out, out[-3000:]


# Two tests past their timeout: one alone, one inside a group; each takes its process down.
PLANTED_LOST_PROCESSES = """
import time
import pytest

def test_lost():
    time.sleep(5)

def test_after_lost():
    pass

@pytest.mark.xdist_group("heavy")
def test_group_first():
    pass

@pytest.mark.xdist_group("heavy")
def test_group_lost():
    time.sleep(5)

@pytest.mark.xdist_group("heavy")
def test_group_last():
    pass
"""


@pytest.mark.parametrize("processes", [1, 2])
def test_a_lost_test_process_costs_its_test_and_the_run_ends(
    tmp_path: Path, processes: int
) -> None:
    """xdist 3.8's own loadgroup hangs on this (its new process waits for a second test that
    never comes, or gets finished units as empty work) and, with two processes, runs each
    lost test again until its restarts are spent."""
    (tmp_path / "conftest.py").write_text(SUITE_SCHEDULER)
    (tmp_path / "test_planted.py").write_text(PLANTED_LOST_PROCESSES)
    out = run_planted(tmp_path, processes)
    assert "INTERNALERROR" not in out, out[-3000:]
    summary = [line.split(" - ")[0] for line in out.splitlines() if line.startswith("FAILED ")]
    # Each lost test is reported failed once: never run again, never lost twice.
    assert sorted(summary) == [
        "FAILED test_planted.py::test_group_lost@heavy",
        "FAILED test_planted.py::test_lost",
    ], out[-3000:]
    assert "2 failed, 3 passed" in out, out[-3000:]


# The suite's second timeout, given 1 s after the test's own, and a test that keeps the
# interpreter lock for 60 s (a libc sleep called through ctypes.PyDLL, which holds it).
SUITE_HARD_TIMEOUT = """
from tests import hard_timeout
import pytest

hard_timeout.GRACE_SECONDS = 1.0

def pytest_configure(config):
    hard_timeout.remember_terminal()

@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item):
    return (yield from hard_timeout.watch(item))
"""
PLANTED_LOCK_HOLDER = """
import ctypes

def test_holds_the_lock():
    ctypes.PyDLL(None).sleep(60)

def test_after():
    pass
"""


def test_a_process_whose_lock_is_held_still_ends(tmp_path: Path) -> None:
    """pytest-timeout's thread needs the interpreter lock to end the process; faulthandler's
    watchdog does not: the stacks are printed, the test is named lost, the run goes on."""
    (tmp_path / "conftest.py").write_text(SUITE_SCHEDULER + SUITE_HARD_TIMEOUT)
    (tmp_path / "test_planted.py").write_text(PLANTED_LOCK_HOLDER)
    out = run_planted(tmp_path, processes=1)
    assert "Timeout (0:00:02)!" in out, out[-3000:]
    assert "in test_holds_the_lock" in out, out[-3000:]
    assert "crashed while running 'test_planted.py::test_holds_the_lock'" in out, out[-3000:]
    assert "1 failed, 1 passed" in out, out[-3000:]
