"""What a person reads about a wrong spec: every problem at once, unknown keys named with the
field they probably are, patterns in words, and one rule for every host path (a spec file's
relative paths taken from its folder, a spec built in code refused with a relative one)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from overnight.core.errors import SpecError
from overnight.core.models import RunSpec
from overnight.core.specs import load_spec, parse_spec
from tests.cli.test_cli import NOWHERE, OVERNIGHT, good_spec, write_spec

RELATIVE = "is a relative path, and a spec built in code has no folder to take it from"


def overnight_start(spec: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(OVERNIGHT), *NOWHERE, "start", str(spec)], capture_output=True, text=True, timeout=60
    )


def test_a_spec_file_with_three_mistakes_names_all_three_on_one_line(tmp_path: Path) -> None:
    spec = good_spec(run_id="Fix_Issue", comand="go", max_restarts=3)
    del spec["command"]
    done = overnight_start(write_spec(tmp_path, spec))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    line = done.stderr
    assert "3 problems" in line
    assert "field comand: unknown field: did you mean `command`?" in line
    assert "field max_restarts: unknown field: it belongs in `budget.max_restarts`" in line
    assert (
        "field run_id: must be 1 to 63 characters of a-z, 0-9 and '-', the first a letter or "
        "digit (e.g. 'fix-issue-42'), or left out, got 'Fix_Issue'"
    ) in line
    assert "pattern" not in line and "^" not in line


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"stal_seconds": 5}, "field stal_seconds: unknown field: did you mean `stall_seconds`?"),
        ({"budget": {"max_restart": 1}}, "field budget.max_restart: unknown field: did you mean"),
        (
            {"budget": {"attention_hours": 1}},
            "field budget.attention_hours: unknown field: it belongs at the top level "
            "(`attention_hours`)",
        ),
        ({"prompt": "fix it"}, "field prompt: unknown field: it belongs in `agent.prompt`"),
        ({"xyzzy": 1}, "field xyzzy: unknown field"),
        ({"owner": "é" * 70}, "field owner: must be at most 64 printable ASCII characters"),
    ],
)
def test_an_unknown_or_wrong_key_is_told_in_words(changes: dict[str, Any], words: str) -> None:
    with pytest.raises(SpecError) as refused:
        parse_spec(good_spec(**changes))
    assert words in str(refused.value), refused.value
    assert "Extra inputs" not in str(refused.value)


def test_relative_paths_of_a_spec_file_are_taken_from_its_folder_all_alike(tmp_path: Path) -> None:
    folder = tmp_path / "specs"
    folder.mkdir()
    spec = good_spec(repo="../app", agent_dir="../agent", binds=[{"path": "data"}])
    loaded = load_spec(write_spec(folder, spec))
    assert loaded.repo == str(tmp_path / "app")
    assert loaded.agent_dir == str(tmp_path / "agent")
    assert loaded.binds[0].path == str(folder / "data")


@pytest.mark.parametrize("field", ["repo", "agent_dir"])
def test_a_spec_built_in_code_with_a_relative_path_is_refused_before_any_start(
    field: str,
) -> None:
    fields = {**good_spec(), field: "../somewhere"}
    with pytest.raises(ValidationError) as refused:
        RunSpec(**fields)
    assert f"'../somewhere' {RELATIVE}: give an absolute path" in str(refused.value)
    with pytest.raises(SpecError) as said:
        parse_spec(fields)
    assert f"field {field}: '../somewhere' {RELATIVE}" in str(said.value)


def test_urls_and_absolute_paths_are_taken_as_they_are(tmp_path: Path) -> None:
    for repo in ("git@example.com:a/b.git", "https://example.com/a.git", "file:///srv/a.git"):
        assert load_spec(write_spec(tmp_path, good_spec(repo=repo))).repo == repo
    written = json.loads(write_spec(tmp_path, good_spec()).read_text())
    assert RunSpec(**written).agent_dir == "/tmp/agent"
