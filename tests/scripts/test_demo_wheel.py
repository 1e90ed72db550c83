"""`overnight demo --agent` runs from an installed wheel, not only from the repository: the
fakes it plays on (the model API, GitHub, a git server) are installed with overnight, and
found beside overnight's own packages (issue 51). Read from pyproject.toml's package list, as
setuptools finds it when it builds the wheel; no build, no network."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from setuptools import find_packages

from overnight.demo import fake_model

REPO = Path(__file__).resolve().parents[2]


def installed_packages() -> set[str]:
    find = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    return set(find_packages(where=str(REPO), include=find["find"]["include"]))


def fakes_the_cli_imports() -> set[str]:
    """Every `fakes...` module a module of overnight/ imports (at any depth of its code)."""
    found: set[str] = set()
    for path in (REPO / "overnight").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fakes"):
                found.add(str(node.module))
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("fakes")}
    return found


def test_the_wheel_holds_every_fake_the_agent_demo_imports_or_runs() -> None:
    packages = installed_packages()
    wanted = fakes_the_cli_imports() | {"fakes.model_api"}  # run as `python -m`
    assert {"fakes.git_http", "fakes.github_api"} <= wanted
    for module in wanted:
        package = (
            module if (REPO / module.replace(".", "/")).is_dir() else module.rpartition(".")[0]
        )
        assert package in packages, f"{module} is imported by overnight/ but not installed"
    # The rest of fakes/ (the Runtime API's fake, ...) stays out of the wheel.
    assert not {name for name in packages if name.startswith("fakes.runtime")}


def test_the_demo_finds_the_fake_model_api_beside_overnights_packages() -> None:
    assert fake_model.PACKAGES_HOME == REPO  # site-packages, in a wheel's install
    assert (fake_model.FAKE_PACKAGE / "__main__.py").is_file()
