"""A violation of the import contracts (`.importlinter`, which CI checks on the tree) fails
them: a copy of the tree holds the decision core's contract, and the same copy with a planted
import the core may not make (`os` in workflows/pure/) fails it, naming the import; a module
planted at `overnight/`'s root, given no floor, fails the package's exhaustive contract."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("overnight", "workflows", "activities")


def lint_imports(root: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on the tree at `root` (its packages first on the path), no cache."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    chosen = [arg for contract in contracts for arg in ("--contract", contract)]
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", *chosen],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def copy_tree(root: Path) -> None:
    """The packages and the contracts, as lint-imports reads them, at `root`."""
    for package in PACKAGES:
        shutil.copytree(
            REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO / ".importlinter", root / ".importlinter")


def test_a_planted_import_breaks_the_contract_it_crosses(tmp_path: Path) -> None:
    copy_tree(tmp_path)
    kept = lint_imports(tmp_path, "pure-decisions")
    assert kept.returncode == 0, kept.stdout + kept.stderr

    (tmp_path / "workflows" / "pure" / "planted.py").write_text("import os\n")
    broken = lint_imports(tmp_path, "pure-decisions")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "The decision core (workflows/pure/) does no I/O and knows no Temporal BROKEN" in (
        " ".join(broken.stdout.split())
    ), broken.stdout
    assert "workflows.pure.planted -> os" in broken.stdout


def test_a_module_at_overnight_s_root_must_be_given_its_floor(tmp_path: Path) -> None:
    """The ground's modules go in overnight/core/; the root holds only the roof's packages and
    the users' paths, each named in the contract."""
    copy_tree(tmp_path)
    kept = lint_imports(tmp_path, "overnight-package")
    assert kept.returncode == 0, kept.stdout + kept.stderr

    (tmp_path / "overnight" / "planted.py").write_text("")
    broken = lint_imports(tmp_path, "overnight-package")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "overnight.planted" in broken.stdout and "exhaustive" in broken.stdout


def test_activities_stand_by_concern_and_a_module_at_their_root_needs_a_floor(
    tmp_path: Path,
) -> None:
    """A concern that imports one above it breaks the layers (here the sandbox's base reaching
    up into the sandbox's activities), and a module planted at `activities/`'s root is not in
    any package of the exhaustive contract."""
    copy_tree(tmp_path)
    kept = lint_imports(tmp_path, "activities-package")
    assert kept.returncode == 0, kept.stdout + kept.stderr

    (tmp_path / "activities" / "sandbox_base" / "planted.py").write_text(
        "import activities.sandbox.activities\n"
    )
    upward = lint_imports(tmp_path, "activities-package")
    assert upward.returncode == 1, upward.stdout + upward.stderr
    assert "activities.sandbox_base.planted -> activities.sandbox.activities" in upward.stdout

    (tmp_path / "activities" / "sandbox_base" / "planted.py").unlink()
    (tmp_path / "activities" / "planted.py").write_text("")
    unplaced = lint_imports(tmp_path, "activities-package")
    assert unplaced.returncode == 1, unplaced.stdout + unplaced.stderr
    assert "activities.planted" in unplaced.stdout and "exhaustive" in unplaced.stdout
