"""docs/layout.md cannot go stale: it names every package folder of the code, and every path
it names exists (a renamed module or folder fails here, not in a newcomer's hands)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYOUT = REPO / "docs" / "layout.md"
CODE = ("overnight", "workflows", "activities", "fakes")
# Folders that are code without being packages (copied into sandboxes).
CODE_FOLDERS = ("overnight/agent_kit",)
# Folders of plug-ins, one package each: the page names the folder and what a plug-in holds,
# so a new plug-in (a coding agent kind) is added without touching the page.
PLUG_IN_FOLDERS = ("overnight/agent_kit/clis/",)
TOP = ("overnight", "workflows", "activities", "fakes", "tests", "bench", "examples", "deploy")
# `path/`, `path/file.py`, `file.py`, `file.md` in backticks (not commands, not dotted names).
NAMED = re.compile(r"`([\w./-]+?(?:/|\.py|\.md|\.toml|\.yaml))`")


def package_folders(repo: Path) -> list[str]:
    found = {f"{top}/" for top in TOP if (repo / top).is_dir()}
    for top in CODE:
        for init in (repo / top).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                found.add(f"{init.parent.relative_to(repo)}/")
    found.update(f"{folder}/" for folder in CODE_FOLDERS if (repo / folder).is_dir())
    return sorted(found)


def unnamed_folders(repo: Path, text: str) -> list[str]:
    named = set(NAMED.findall(text))
    return [
        folder for folder in package_folders(repo) if folder not in named and not _a_plug_in(folder)
    ]


def _a_plug_in(folder: str) -> bool:
    return any(
        folder.startswith(parent) and folder.count("/") == parent.count("/") + 1
        for parent in PLUG_IN_FOLDERS
    )


def missing_paths(repo: Path, text: str) -> list[str]:
    missing = []
    for path in sorted(set(NAMED.findall(text))):
        if "/" in path.rstrip("/"):
            exists = (repo / path).exists()
        elif path.endswith("/"):
            exists = (repo / path).is_dir()
        else:  # a bare file name: somewhere in the code or at the root
            exists = (repo / path).exists() or any(
                next((repo / top).rglob(path), None) is not None for top in (*CODE, "tests")
            )
        if not exists:
            missing.append(path)
    return missing


def test_the_layout_page_names_every_package_folder() -> None:
    assert unnamed_folders(REPO, LAYOUT.read_text(encoding="utf-8")) == []


def test_every_path_the_layout_page_names_exists() -> None:
    assert missing_paths(REPO, LAYOUT.read_text(encoding="utf-8")) == []


# What a newcomer adds, each of which the page's "Where new things go" must place.
NEW_THINGS = ("provider", "coding agent kind", "activity", "workflow step", "CLI command")


def where_new_things_go(text: str) -> dict[str, str]:
    """Each entry of the page's "Where new things go": its thing, and what it says."""
    section = text.split("## Where new things go", 1)[-1].split("\n## ", 1)[0]
    entries = re.findall(r"^- \*\*A new ([^*]+)\*\*(.*?)(?=^- \*\*|\Z)", section, re.M | re.S)
    return {thing.strip(): body for thing, body in entries}


def test_the_layout_page_says_where_each_new_thing_goes() -> None:
    entries = where_new_things_go(LAYOUT.read_text(encoding="utf-8"))
    for thing in NEW_THINGS:
        assert thing in entries, f"docs/layout.md does not say where a new {thing} goes"
        assert NAMED.search(entries[thing]), f"the new {thing}'s entry names no path"


def test_a_missing_entry_is_caught() -> None:
    text = "## Where new things go\n\n- **A new provider**: `activities/providers/`.\n"
    assert list(where_new_things_go(text)) == ["provider"]


def test_a_new_package_or_a_renamed_module_is_caught(tmp_path: Path) -> None:
    (tmp_path / "workflows" / "pure").mkdir(parents=True)
    (tmp_path / "workflows" / "__init__.py").write_text("")
    (tmp_path / "workflows" / "pure" / "__init__.py").write_text("")
    (tmp_path / "workflows" / "pure" / "decide.py").write_text("")
    text = "`workflows/` holds `workflows/pure/decide.py` and `calls.py`"
    assert unnamed_folders(tmp_path, text) == ["workflows/pure/"]
    assert missing_paths(tmp_path, text) == ["calls.py"]


def test_a_new_kind_needs_no_entry_but_a_package_in_it_does(tmp_path: Path) -> None:
    kit = tmp_path / "overnight" / "agent_kit" / "clis"
    for folder in (kit / "newkind", kit / "newkind" / "parts"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    (tmp_path / "overnight" / "__init__.py").write_text("")
    text = "`overnight/` and `overnight/agent_kit/` with its kinds in `overnight/agent_kit/clis/`"
    assert unnamed_folders(tmp_path, text) == ["overnight/agent_kit/clis/newkind/parts/"]
