"""The users' import paths and the ground behind them: `overnight.models`, `overnight.codec`
and `overnight.connect` (what docs/from-your-code.md and docs/encryption.md tell users to
import) re-export the modules of those names in `overnight.core`, every public name, the same
objects; and no code of overnight's (the packages, tests, bench, fakes, scripts, worker.py)
imports them: it imports `overnight.core`. examples/ does, as users do."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

import overnight

REPO = Path(__file__).resolve().parents[2]
PUBLIC_PATHS = ("models", "codec", "connect")
SCANNED = ("overnight", "workflows", "activities", "tests", "bench", "fakes", "scripts")
# This file names the paths to check them.
OWN_TEST = Path(__file__).resolve().relative_to(REPO).as_posix()
NAMED = re.compile(r"^overnight\.(?:" + "|".join(PUBLIC_PATHS) + r")(?:\.|$)")
MAY_NAME = re.compile(r"overnight\.(?:" + "|".join(PUBLIC_PATHS) + r")|from overnight import")


def public_names(module: ModuleType) -> set[str]:
    """What a module of the ground offers: the names it defines, and those it re-exports
    (`from x import Name as Name`), without a leading underscore."""
    assert module.__file__ is not None
    names: set[str] = set()
    for node in ast.parse(Path(module.__file__).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            names.update(a.name for a in node.names if a.asname == a.name)
    return {name for name in names if not name.startswith("_")}


@pytest.mark.parametrize("name", PUBLIC_PATHS)
def test_a_public_path_exports_its_ground_module_the_same_objects(name: str) -> None:
    public = importlib.import_module(f"overnight.{name}")
    ground = importlib.import_module(f"overnight.core.{name}")
    exported = {n for n in vars(public) if not n.startswith("_") and n != "annotations"}
    assert exported == public_names(ground)
    assert [n for n in sorted(exported) if getattr(public, n) is not getattr(ground, n)] == []


def test_the_models_the_docs_show_are_the_grounds() -> None:
    public = importlib.import_module("overnight.models")
    ground = importlib.import_module("overnight.core.models")
    for name in ("RunSpec", "RunStatus", "RunResult", "BudgetExtension", *overnight.__all__):
        assert getattr(public, name) is getattr(ground, name) is getattr(overnight, name)


def importers_of_public_paths(repo: Path) -> list[str]:
    """`path:line` of each import of a users' path (or a string naming one, as
    `monkeypatch.setattr` takes) in overnight's code, tests and tools."""
    found = []
    paths = [p for top in SCANNED for p in sorted((repo / top).rglob("*.py"))]
    for path in [*paths, repo / "worker.py"]:
        relative = path.relative_to(repo).as_posix()
        if "__pycache__" in relative or relative == OWN_TEST or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        if not MAY_NAME.search(text):  # most files: parsing them all takes seconds
            continue
        for node in ast.walk(ast.parse(text, relative)):
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                module = node.module or ""
                named = [module, *(f"{module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                named = [node.value]
            else:
                continue
            if any(NAMED.match(name) for name in named):
                found.append(f"{relative}:{node.lineno}")
    return found


def test_no_code_of_overnight_imports_a_users_path() -> None:
    assert importers_of_public_paths(REPO) == []


def test_an_import_of_a_users_path_is_caught(tmp_path: Path) -> None:
    (tmp_path / "activities").mkdir()
    (tmp_path / "activities" / "uses.py").write_text(
        "from overnight.models import RunSpec\n"
        "import overnight.codec\n"
        "from overnight import connect\n"
        "from overnight.core.models import RunStatus\n"
        "from overnight.modelsx import y\n"
        'PATCHED = "overnight.connect.connect"\n'
    )
    (tmp_path / "worker.py").write_text("import overnight.core.connect\n")
    assert importers_of_public_paths(tmp_path) == [
        "activities/uses.py:1",
        "activities/uses.py:2",
        "activities/uses.py:3",
        "activities/uses.py:6",
    ]
