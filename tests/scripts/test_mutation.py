"""Mutation testing (`bash scripts/mutation`) keeps working: mutmut, with the project's own
settings and conftest, kills a mutant that a test catches and reports one that no test catches;
and mutmut's copy of the tree holds everything the tests can import.

The whole run takes minutes and is not part of the suite; this one runs mutmut on one small
function in seconds, so a broken copy list, a conftest importing something mutmut does not copy
(as when tests/conftest.py began to import `bench`) or a mutmut that stops working fails here
rather than silently in the next whole run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
MUTMUT = Path(sys.executable).parent / "mutmut"
# What a copy of the project for mutmut leaves out: caches, and mutmut's own working folder.
NOT_COPIED = shutil.ignore_patterns("__pycache__", "mutants", "artifacts", ".*_cache")
# How long one mutmut command may take: a cap, not a bound (about 9 s of work on an idle
# machine). It runs at the suite's own priority: at nice 19 beside the loaded suite it got
# almost no CPU (a nice-19 process weighs 15 against 1,024 per busy test process) and ran past
# 600 s in CI.
MUTMUT_CAP = 600

PROBE = '''"""Two comparisons, for mutmut to plant its bugs in."""


def is_over(spent: int, limit: int) -> bool:
    return spent > limit


def is_under(spent: int, limit: int) -> bool:
    return spent < limit
'''

PROBE_TESTS = """from workflows.pure.mutation_probe import is_over, is_under


def test_spending_the_limit_exactly_is_not_over_it() -> None:
    assert is_over(2, 1) and not is_over(1, 1)


def test_spending_nothing_is_under_a_limit() -> None:
    assert is_under(0, 1)  # never at the limit itself: `<=` for `<` goes unnoticed
"""


def mutmut_settings() -> dict[str, Any]:
    settings: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]
    return settings["mutmut"]


def toml_list(values: list[str]) -> str:
    return "[" + ", ".join(f'"{value}"' for value in values) + "]"


def project_with_probe(folder: Path) -> None:
    """A copy of the project's code and tests, with the probe and its tests added, whose
    [tool.mutmut] is the project's but mutates only the probe and runs only its tests."""
    settings = mutmut_settings()
    for name in [*settings["source_paths"], *settings["also_copy"], "tests"]:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, folder / name, ignore=NOT_COPIED)
        else:
            shutil.copy2(source, folder / name)
    (folder / "workflows" / "pure" / "mutation_probe.py").write_text(PROBE)
    (folder / "tests" / "workflows" / "pure" / "test_mutation_probe.py").write_text(PROBE_TESTS)
    pyproject = (REPO / "pyproject.toml").read_text()
    head, _, rest = pyproject.partition("[tool.mutmut]")
    _, next_table, tail = rest.partition("\n[")
    own = {
        "source_paths": toml_list(settings["source_paths"]),
        "also_copy": toml_list(settings["also_copy"]),
        "pytest_add_cli_args": toml_list(settings.get("pytest_add_cli_args", [])),
        "only_mutate": toml_list(["workflows/pure/mutation_probe.py"]),
        "pytest_add_cli_args_test_selection": toml_list(
            ["tests/workflows/pure/test_mutation_probe.py"]
        ),
    }
    table = "[tool.mutmut]\n" + "".join(f"{key} = {value}\n" for key, value in own.items())
    (folder / "pyproject.toml").write_text(head + table + next_table + tail)


def mutmut(folder: Path, *args: str) -> str:
    # As scripts/mutation runs it: no test process's variables, no PYTHONPATH that could lend
    # the copy a package it lacks.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "PYTHONPATH"}
    done = subprocess.run(
        [str(MUTMUT), *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=MUTMUT_CAP,
    )
    assert done.returncode == 0, (
        f"mutmut {' '.join(args)}:\n{done.stdout[-1500:]}{done.stderr[-1500:]}"
    )
    return done.stdout


@pytest.mark.long
@pytest.mark.timeout(3 * MUTMUT_CAP)
def test_mutmut_kills_the_mutant_a_test_catches_and_reports_the_one_it_misses(
    tmp_path: Path,
) -> None:
    project_with_probe(tmp_path)
    mutmut(tmp_path, "run", "--max-children", "1")
    fates = dict(
        line.strip().split(": ", 1)
        for line in mutmut(tmp_path, "results", "--all", "true").splitlines()
        if ": " in line
    )
    over = {name: fate for name, fate in fates.items() if ".x_is_over__" in name}
    under = {name: fate for name, fate in fates.items() if ".x_is_under__" in name}
    assert over and set(over.values()) == {"killed"}, fates
    survivors = [name for name, fate in under.items() if fate == "survived"]
    assert survivors, fates
    shown = [mutmut(tmp_path, "show", name) for name in survivors]
    assert any("return spent <= limit" in diff for diff in shown), shown


def test_mutmut_copies_every_package_and_module_the_tests_can_import() -> None:
    """mutmut runs the tests in its copy of the tree (mutants/), which holds only the source
    paths, the also_copy list and tests/: every package and module at the repo's root is one of
    them, so no test or conftest can import what the copy lacks."""
    settings = mutmut_settings()
    copied = {*settings["source_paths"], *settings["also_copy"], "tests"}
    importable = {
        path.name
        for path in REPO.iterdir()
        if (path.is_dir() and (path / "__init__.py").exists())
        or (path.is_file() and path.suffix == ".py")
    }
    assert importable - copied == set()
    for path in settings["pytest_add_cli_args_test_selection"]:
        assert (REPO / path).exists(), path
