"""A coding-agent kind has its places: its row in `overnight.core.agent_kinds.AGENT_CLIS` (what the
worker knows of it) and its package in the kit (`overnight/agent_kit/clis/`: what it does in
the sandbox). No other code tests a kind's name, so adding a kind touches only those, its
fake model API and its tests (docs/layout.md, "A new coding agent kind")."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import get_args

import pytest

from overnight.core.agent_kinds import AGENT_CLIS, RUST_TARGET, AgentKind

REPO = Path(__file__).resolve().parents[2]
KIT = REPO / "overnight" / "agent_kit"
CODE = ("overnight", "activities", "workflows")
# Where a kind's name may be written: its row, its package in the kit, and the demo, which
# plays the kinds it has fakes for.
KIND_PLACES = (
    "overnight/core/agent_kinds.py",
    "overnight/agent_kit/clis/",
    "overnight/demo/",
)


def kit_kinds() -> list[str]:
    sys.path.insert(0, str(KIT))  # as in the sandbox
    try:
        import clis
    finally:
        sys.path.remove(str(KIT))
    return list(clis.CLIS)


def kind_names_outside(repo: Path, kinds: set[str]) -> list[str]:
    """`path:line` of each string constant naming a kind outside the kinds' places."""
    found = []
    for top in CODE:
        for path in sorted((repo / top).rglob("*.py")):
            relative = path.relative_to(repo).as_posix()
            if "__pycache__" in relative or relative.startswith(KIND_PLACES):
                continue
            for node in ast.walk(ast.parse(path.read_text(), relative)):
                if isinstance(node, ast.Constant) and node.value in kinds:
                    found.append(f"{relative}:{node.lineno}")
    return found


def test_the_spec_the_worker_and_the_kit_know_the_same_kinds() -> None:
    assert list(get_args(AgentKind)) == list(AGENT_CLIS) == kit_kinds()


@pytest.mark.parametrize("kind", sorted(AGENT_CLIS))
def test_each_row_names_its_binary_and_launcher_on_every_cpu(kind: str) -> None:
    cli = AGENT_CLIS[kind]
    for cpu in RUST_TARGET:
        binary = cli.executable(cpu)
        assert binary.startswith("node_modules/") and "{" not in binary, binary
    assert all("{" not in value for value in cli.run_environment("/x").values())
    assert cli.key_env and cli.api_hosts and set(cli.api_hosts) <= set(cli.egress_hosts)


def test_no_code_outside_a_kinds_places_tests_its_name() -> None:
    assert kind_names_outside(REPO, set(AGENT_CLIS)) == []


def test_a_kind_named_outside_its_places_is_caught(tmp_path: Path) -> None:
    (tmp_path / "activities").mkdir()
    (tmp_path / "activities" / "setup.py").write_text('if kind == "codex":\n    pass\n')
    (tmp_path / "overnight" / "agent_kit" / "clis").mkdir(parents=True)
    (tmp_path / "overnight" / "agent_kit" / "clis" / "codex.py").write_text('kind = "codex"\n')
    assert kind_names_outside(tmp_path, {"codex"}) == ["activities/setup.py:1"]
