"""The real pinned CLIs, installed once per test session through overnight's own installer.

`installed_cli(kind)` installs the kind (`overnight.worker.agent_clis.install`) into one
folder for the whole session (shared by pytest-xdist's processes: the installer's lock makes
the second wait for the first; `OVERNIGHT_TEST_AGENTS_HOME` names a folder kept across
sessions instead). A test is skipped only when the CLI is not installed yet and the npm
registry cannot be reached. The timings the tests measure are printed at the session's end
and written to `agent-cli-measurements.json` in the session's temporary folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from overnight.core.agent_kinds import agent_cli
from overnight.worker.agent_clis import Installed, InstallError, check, install

MEASUREMENTS: dict[str, float] = {}


def measure(name: str, seconds: float) -> None:
    MEASUREMENTS[name] = round(seconds, 3)


def _registry_problem() -> str:
    npm = shutil.which("npm")
    if npm is None:
        return ""  # not a registry problem: the install fails and says to install npm
    try:
        done = subprocess.run(
            [npm, "ping", "--no-update-notifier"], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        return "npm ping took over 30 s"
    if done.returncode != 0:
        return (done.stderr.strip() or done.stdout.strip())[-300:]
    return ""


@pytest.fixture(scope="session")
def agents_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    kept = os.environ.get("OVERNIGHT_TEST_AGENTS_HOME")
    if kept:
        return Path(kept)
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's folder, shared by its worker processes
    return base / "agent-clis"


@pytest.fixture(scope="session")
def installed_cli(agents_home: Path) -> Callable[[str], Installed]:
    done: dict[str, Installed] = {}

    def installed(kind: str) -> Installed:
        if kind not in done:
            cli = agent_cli(kind)
            if not check(cli, agents_home, verify=False).ready:
                problem = _registry_problem()
                if problem:
                    pytest.skip(
                        f"the npm registry cannot be reached ({problem}): {kind} not installed"
                    )
            try:
                done[kind] = install(cli, agents_home)
            except InstallError as error:
                pytest.fail(f"installing {cli.npm_spec}: {error}")
            measure(
                f"{kind}: install (s){'' if done[kind].fresh else ', already there'}",
                done[kind].seconds,
            )
        return done[kind]

    return installed


@pytest.fixture(scope="session", autouse=True)
def _write_measurements(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield
    if MEASUREMENTS:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        path = tmp_path_factory.getbasetemp() / f"agent-cli-measurements-{worker}.json"
        path.write_text(json.dumps(MEASUREMENTS, indent=2), encoding="utf-8")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if MEASUREMENTS:
        terminalreporter.section("real coding-agent CLIs: measurements")
        for name, value in MEASUREMENTS.items():
            terminalreporter.line(f"{name}: {value}")
