"""A user's own `workflows` (or `activities`) package earlier on sys.path hides overnight's:
the worker and the `overnight` command refuse to start, naming the folder that hides it,
instead of failing on an import error that names neither."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from overnight.core.own_packages import HOME, shadowed_packages
from tests.conftest import REPO_ROOT


def a_project_with(tmp_path: Path, *names: str) -> Path:
    """A user's Temporal project laid out as the samples teach."""
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
        (tmp_path / name / "agent_run.py").write_text("raise ImportError('not overnight')\n")
    return tmp_path


def test_overnight_s_own_packages_are_found_here() -> None:
    assert shadowed_packages() == []
    assert (HOME / "workflows" / "agent_run.py").is_file()


def test_packages_elsewhere_are_named(tmp_path: Path) -> None:
    elsewhere = tmp_path / "not-overnight"
    elsewhere.mkdir()
    problems = shadowed_packages(elsewhere)
    assert [p.split(" finds ")[0] for p in problems] == [
        "`import workflows`",
        "`import activities`",
    ]
    assert f"not overnight's own {elsewhere / 'workflows'}" in problems[0]


@pytest.mark.parametrize("shadowing", [("workflows",), ("activities", "workflows")])
def test_the_worker_refuses_to_start_naming_the_package_that_hides_overnight_s(
    tmp_path: Path, shadowing: tuple[str, ...]
) -> None:
    project = a_project_with(tmp_path, *shadowing)
    # worker.py run from the user's project folder, which comes first on sys.path (as a
    # copy of worker.py beside the project would, or the project on PYTHONPATH).
    script = f"import runpy; runpy.run_path({str(REPO_ROOT / 'worker.py')!r}, run_name='__main__')"
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == len(shadowing)
    for name in shadowing:
        assert any(
            line.startswith(f"error: `import {name}` finds {project / name}, not overnight's own")
            for line in lines
        ), done.stderr
    assert "Traceback" not in done.stderr


def test_the_command_refuses_too(tmp_path: Path) -> None:
    project = a_project_with(tmp_path, "workflows")
    # The console script's own folder comes first on sys.path; the project on PYTHONPATH next.
    script = "import sys; from overnight.cli.entry import main; sys.exit(main())"
    done = subprocess.run(
        [sys.executable, "-c", script, "--help"],
        cwd=project,
        env={**os.environ, "PYTHONPATH": f"{project}{os.pathsep}{REPO_ROOT}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: `import workflows` finds {project / 'workflows'}")
