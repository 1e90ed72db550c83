"""The `overnight` CLI: bad input is refused with exit 2 and one line, before any connection."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from overnight.cli.main import main

OVERNIGHT = Path(sys.executable).parent / "overnight"
# Nothing listens here: a command that wrongly connects fails with 1, not 2.
NOWHERE = ["--address", "127.0.0.1:9"]


def good_spec(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "run_id": "cli-test",
        "repo": "/tmp/nowhere.git",
        "agent_dir": "/tmp/agent",
        "command": "python3 /workspace/agent/main.py",
    }
    spec.update(changes)
    return spec


def write_spec(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*NOWHERE, *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"run_id": "Not_Valid"}, "run_id"),
        ({"poll_seconds": 0}, "poll_seconds"),
        ({"budget": {"max_restarts": -1}}, "budget.max_restarts"),
        ({"surprise": True}, "surprise"),
        ({"cwd": "/etc"}, "cwd"),
    ],
)
def test_bad_spec_exits_2_with_one_line_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, Any], field: str
) -> None:
    code, out, err = run_cli(capsys, "start", str(write_spec(tmp_path, good_spec(**changes))))
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert f"field {field}:" in err


def test_spec_missing_a_required_field_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = good_spec()
    del spec["command"]
    code, _, err = run_cli(capsys, "start", str(write_spec(tmp_path, spec)))
    assert code == 2
    assert "field command:" in err


def test_missing_spec_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "start", str(tmp_path / "absent.json"))
    assert code == 2
    assert err.strip() == f"overnight: {tmp_path / 'absent.json'}: no such file"


def test_spec_that_is_not_json_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "spec.json"
    path.write_text("{run_id: oops")
    code, _, err = run_cli(capsys, "start", str(path))
    assert code == 2
    assert "not valid JSON" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["status"],
        ["start"],
        ["extend", "run-1", "--restarts", "many"],
        ["list", "--colour"],
    ],
)
def test_garbage_arguments_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--restarts", "-1"], "--restarts"),
        (["--hours", "-0.5"], "--hours"),
        (["--spend", "-3"], "--spend"),
        (["--wait-hours", "-1"], "--wait-hours"),
        (["--done-checks", "-1"], "--done-checks"),
        ([], "nothing to add"),
    ],
)
def test_extend_refuses_negative_or_empty_extensions(
    capsys: pytest.CaptureFixture[str], flags: list[str], named: str
) -> None:
    code, _, err = run_cli(capsys, "extend", "run-1", *flags)
    assert code == 2
    assert named in err
    assert len(err.strip().splitlines()) == 1


def test_relative_paths_in_a_spec_are_taken_from_its_folder(tmp_path: Path) -> None:
    from overnight.cli.client import load_spec

    path = write_spec(tmp_path, good_spec(agent_dir="agent", repo="../origin.git"))
    spec = load_spec(path)
    assert spec.agent_dir == str(tmp_path / "agent")
    assert spec.repo == str(tmp_path.parent / "origin.git")
    url_spec = load_spec(write_spec(tmp_path, good_spec(repo="git@example.com:a/b.git")))
    assert url_spec.repo == "git@example.com:a/b.git"


def test_unreachable_server_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "status", "some-run")
    assert code == 1
    assert len(err.strip().splitlines()) == 1


def test_console_script_prints_no_traceback_for_a_bad_spec(tmp_path: Path) -> None:
    path = write_spec(tmp_path, good_spec(run_id="BAD"))
    done = subprocess.run(
        [str(OVERNIGHT), "start", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    path = write_spec(tmp_path, good_spec(run_id="BAD"))
    done = subprocess.run(
        [str(OVERNIGHT), "--debug", "start", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "Traceback" in done.stderr
