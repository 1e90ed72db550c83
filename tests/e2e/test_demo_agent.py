"""`bash scripts/demo --agent claude-code`: the real Claude Code CLI, killed once during a tool
call, resumes its session in place: one attempt, no restart, the same session id before the
kill and after it (overnight/cli/demo_agent.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from activities.providers.local.isolation import bwrap_problem
from overnight.cli.demo_agent import run_agent_demo
from overnight.coding_agents import agent_cli, install_folder
from overnight.worker.agent_clis import Installed
from overnight.worker.devserver import DevServer
from tests.agent_clis.conftest import agents_home, installed_cli  # noqa: F401 (fixtures)

ADAPTER = Path(__file__).resolve().parents[2] / "overnight" / "agent_kit" / "coding_agent.py"


async def test_the_agent_demo_resumes_the_same_session_after_the_cli_is_killed(
    dev_server: DevServer,
    installed_cli: Callable[[str], Installed],  # noqa: F811
) -> None:
    if not ADAPTER.is_file():
        pytest.skip(f"the adapter {ADAPTER.name} is not on this tree yet")
    if bwrap_problem() is not None:
        pytest.skip(f"coding agents run only in isolated sandboxes: {bwrap_problem()}")
    # Skipped by the fixture when the CLI is not installed and the npm registry is out of
    # reach; linked into this session's $OVERNIGHT_HOME/agents, where the demo's worker looks.
    installed = installed_cli("claude-code")
    place = install_folder(agent_cli("claude-code"))
    place.parent.mkdir(parents=True, exist_ok=True)
    if not place.exists():
        place.symlink_to(installed.folder)

    lines: list[str] = []
    code = await run_agent_demo(config=dev_server.config, out=lines.append)
    output = "\n".join(lines)
    assert code == 0, output
    assert "(reused)" in output  # the session's server, left running
    assert "finished after 1 attempt (0 restarts" in output
    assert "killed the CLI (pid " in output
    before = re.search(r"^session before the kill: ([0-9a-f-]{36}) ", output, re.M)
    after = re.search(r"^session after the kill:  ([0-9a-f-]{36}) ", output, re.M)
    assert before and after, output
    assert before.group(1) == after.group(1)
    assert "the same session, resumed in place" in output
    assert "attempts: 1, restarts: 0" in output
    assert re.search(r"^  [0-9a-f]+ step \d+: Write /workspace/app/greet.py$", output, re.M)
    assert "Tool call interrupted" in output  # the killed call was not taken as done
    assert "killed by signal 9" in output  # the adapter's note of the crash
