"""`overnight start --agent KIND --repo URL --prompt TEXT` builds a coding agent's spec from
flags (what it starts, and `--print-spec`); bad flags are refused with exit 2 and one line
before any connection; `overnight agents` says which kinds this machine's worker can run, and
the one command that fixes the others."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from overnight.cli import agents as agents_cli
from overnight.cli import client as api
from overnight.cli import start_command
from overnight.core.agent_kinds import AGENT_CLIS, agent_cli
from overnight.core.coding_agents import INSTALL_SCRIPT
from overnight.core.home import HOME_ENV
from overnight.core.models import RunSpec
from tests.activities.test_coding_agent_setup import fake_install
from tests.cli.test_cli import run_cli, write_spec


def printed_spec(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "start", *flags, "--print-spec")
    assert (code, err) == (0, ""), err
    spec: dict[str, Any] = json.loads(out)
    return spec


def test_the_fewest_flags_make_the_issues_spec(capsys: pytest.CaptureFixture[str]) -> None:
    url = "https://example.com/app.git"
    spec = printed_spec(capsys, "--agent", "claude-code", "--repo", url, "--prompt", "Fix it")
    assert spec == {
        "repo": url,
        "agent": {"kind": "claude-code", "prompt": "Fix it"},
        "secret_env": ["ANTHROPIC_API_KEY"],
    }
    codex = printed_spec(capsys, "--agent", "codex", "--repo", url, "--prompt", "Fix it")
    assert codex["secret_env"] == ["OPENAI_API_KEY"]


def test_every_flag_lands_in_its_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompt = tmp_path / "task.md"
    prompt.write_text("Make tests/test_api.py pass.\nDo not touch the API.\n")
    monkeypatch.chdir(tmp_path)
    spec = printed_spec(
        capsys,
        "--agent",
        "codex",
        "--repo",
        "origin.git",
        "--prompt-file",
        str(prompt),
        "--model",
        "gpt-5.5-codex",
        "--max-turns",
        "40",
        "--base-url",
        "http://127.0.0.1:8123/v1",
        "--run-id",
        "fix-flaky",
        "--branch",
        "work/fix",
        "--secret-env",
        "FAKE_KEY",
        "--writable-bind",
        "origin.git",
        "--host-port",
        "9000",
        "--max-spend",
        "5",
    )
    origin = str(tmp_path / "origin.git")
    assert spec == {
        "run_id": "fix-flaky",
        "repo": origin,
        "branch": "work/fix",
        "agent": {
            "kind": "codex",
            "prompt": prompt.read_text(),
            "model": "gpt-5.5-codex",
            "max_turns": 40,
            "base_url": "http://127.0.0.1:8123/v1",
        },
        "secret_env": ["FAKE_KEY"],
        "budget": {"max_spend_usd": 5.0},
        "binds": [{"path": origin, "writable": True}],
        "host_ports": [8123, 9000],  # a loopback base URL's port is reachable from the sandbox
    }


def test_start_hands_that_spec_to_the_server(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[RunSpec] = []

    async def start_run(client: Any, spec: RunSpec, *, task_queue: str) -> Any:
        started.append(spec)
        return SimpleNamespace(id="fix-flaky")

    async def connect(args: Any) -> Any:
        return SimpleNamespace(
            service_client=SimpleNamespace(config=SimpleNamespace(target_host="127.0.0.1:9")),
            namespace="default",
        )

    monkeypatch.setattr(api, "start_run", start_run)
    monkeypatch.setattr(start_command, "connect", connect)
    code, out, _ = run_cli(
        capsys,
        "start",
        "--agent",
        "claude-code",
        "--repo",
        "https://example.com/app.git",
        "--prompt",
        "Fix it",
        "--run-id",
        "fix-flaky",
        "--no-wait",  # the fake start makes no run for the worker's word to be read from
    )
    assert code == 0 and out.startswith("started fix-flaky")
    [spec] = started
    assert spec.agent is not None and spec.agent.prompt == "Fix it"
    assert (spec.run_id, spec.branch, spec.agent_dir, spec.command) == (
        "fix-flaky",
        "agent/fix-flaky",
        "",
        "",
    )


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--agent", "claude-code", "--prompt", "x"], "--agent needs --repo URL"),
        (["--agent", "claude-code", "--repo", "r"], "--prompt TEXT or --prompt-file PATH"),
        (
            ["--agent", "codex", "--repo", "r", "--prompt", "x", "--prompt-file", "f"],
            "(one of them)",
        ),
        (["--agent", "aider", "--repo", "r", "--prompt", "x"], "invalid choice: 'aider'"),
        (
            ["--repo", "r", "--prompt", "x"],
            "start takes a spec file, --many TASKS.jsonl or --agent",
        ),
        (["--agent", "codex", "--repo", "r", "--prompt", ""], "field agent.prompt"),
        (
            ["--agent", "codex", "--repo", "r", "--prompt", "x", "--base-url", "ftp://h"],
            "field agent.base_url",
        ),
        (
            ["--agent", "codex", "--repo", "r", "--prompt-file", "/nonexistent/task.md"],
            "--prompt-file /nonexistent/task.md: no such file",
        ),
    ],
)
def test_bad_flags_are_refused_with_one_line(
    capsys: pytest.CaptureFixture[str], flags: list[str], words: str
) -> None:
    try:
        code, out, err = run_cli(capsys, "start", *flags)
    except SystemExit as exited:  # argparse's own refusals
        captured = capsys.readouterr()
        code, out, err = int(str(exited.code)), captured.out, captured.err
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1 and words in err, err


def test_agent_flags_do_not_go_with_a_spec_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = write_spec(tmp_path, {"repo": "/r", "agent_dir": "/a", "command": "c"})
    for flags, words in (
        (["--prompt", "x"], "--prompt goes with --agent"),
        (["--agent", "codex"], "(one of them)"),
    ):
        with pytest.raises(SystemExit) as exited:
            run_cli(capsys, "start", str(spec), *flags)
        assert exited.value.code == 2 and words in capsys.readouterr().err


def test_overnight_agents_says_what_is_missing_and_the_fix(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    monkeypatch.setattr("activities.providers.local.isolation.bwrap_problem", lambda: None)
    code, out, _ = run_cli(capsys, "agents")
    lines = out.strip().splitlines()
    assert code == 1 and len(lines) == len(AGENT_CLIS)
    for line, kind in zip(lines, AGENT_CLIS, strict=True):
        cli = agent_cli(kind)
        assert line == (
            f"{kind} {cli.version}: not available: {cli.npm_spec} is not installed in "
            f"{tmp_path / 'agents'}; fix: {INSTALL_SCRIPT}"
        )

    binary = fake_install(tmp_path, agent_cli("claude-code"))
    code, out, _ = run_cli(capsys, "agents")
    first, second, *_ = out.strip().splitlines()
    assert code == 1 and first == f"claude-code 2.1.332: ready ({binary})"
    assert second.startswith("codex 0.171.0: not available")

    for kind in list(AGENT_CLIS)[1:]:
        fake_install(tmp_path, agent_cli(kind))
    code, out, _ = run_cli(capsys, "agents", "--json")
    states = json.loads(out)
    assert code == 0 and [s["ready"] for s in states] == [True] * len(AGENT_CLIS)
    assert states[0]["executable"] == str(binary)


def test_overnight_agents_says_a_broken_install_and_no_sandbox(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    binary = fake_install(tmp_path, agent_cli("codex"))
    binary.write_text("#!/bin/sh\necho 'codex-cli 0.0.1'\n")
    codex = agents_cli.readiness()[list(AGENT_CLIS).index("codex")]
    assert not codex["ready"] and codex["fix"] == f"{INSTALL_SCRIPT} --force"
    assert "codex-cli 0.0.1" in codex["line"]

    fake_install(tmp_path, agent_cli("claude-code"))
    monkeypatch.setattr(
        "activities.providers.local.isolation.bwrap_problem", lambda: "bwrap is not installed"
    )
    claude = agents_cli.readiness()[list(AGENT_CLIS).index("claude-code")]
    assert not claude["ready"] and "coding agents run only in isolated sandboxes" in claude["line"]
    assert "bubblewrap" in claude["fix"]
    assert os.environ[HOME_ENV] == str(tmp_path)
