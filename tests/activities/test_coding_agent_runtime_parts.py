"""The pure parts of coding agents on Runtime: the CLI template's key and the files it
carries, and what the worker takes from a checkpoint's session file (never a path outside
the run's store)."""

from __future__ import annotations

import json
from pathlib import Path

from activities.coding_agent.sessions import is_safe_relative, session_file_of
from activities.coding_agent.template import carried_files, template_key, template_name
from overnight.core.agent_kinds import agent_cli
from overnight.core.models import RunSpec

DIGEST = "ab" * 32


def spec(**fields: object) -> RunSpec:
    agent = {"kind": "claude-code", "prompt": "x"}
    given = {"repo": "https://example.com/a.git", "provider": "runtime", "agent": agent}
    return RunSpec.model_validate(given | fields)


def test_a_template_is_one_per_cli_version_cpu_and_sandbox_size() -> None:
    cli = agent_cli("claude-code")
    key = template_key(cli, "x64", spec())
    assert key == "claude-code-2.1.332-x64-2cpu-4096m-defaultd"
    assert template_key(cli, "x64", spec(vcpu=4)) != key
    assert template_key(agent_cli("codex"), "x64", spec()) != key
    assert template_name(key) == "overnight-cli-claude-code-2-1-332-x64-2cpu-4096m-defaultd"


def test_the_template_carries_the_installs_files_not_its_links(tmp_path: Path) -> None:
    (tmp_path / "node_modules/pkg").mkdir(parents=True)
    (tmp_path / "node_modules/pkg/claude").write_bytes(b"\x7fELF")
    (tmp_path / "node_modules/.bin").mkdir()
    (tmp_path / "node_modules/.bin/claude").symlink_to("../pkg/claude")
    assert carried_files(tmp_path) == [Path("node_modules/pkg/claude")]


def checkpoint(path: str, size: object = 10, digest: str = DIGEST) -> str:
    return json.dumps(
        {"coding_agent": {"session_file": {"path": path, "bytes": size, "sha256": digest}}}
    )


def test_the_session_file_a_checkpoint_names_is_taken_only_inside_the_store() -> None:
    found = session_file_of(checkpoint("projects/-workspace-app/abc.jsonl"))
    assert found is not None and (found.path, found.size) == (
        "projects/-workspace-app/abc.jsonl",
        10,
    )
    for bad in ("../x.jsonl", "/etc/passwd", "projects/../../x", ".hidden/x", "a//b", ""):
        assert session_file_of(checkpoint(bad)) is None, bad
    assert session_file_of(checkpoint("a.jsonl", size=0)) is None
    assert session_file_of(checkpoint("a.jsonl", size=True)) is None
    assert session_file_of(checkpoint("a.jsonl", digest="nope")) is None
    assert session_file_of("not json") is None and session_file_of(None) is None
    assert is_safe_relative("sessions/2026/12/02/rollout-1-abc.jsonl")
