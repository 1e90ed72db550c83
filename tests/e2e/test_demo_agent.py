"""`overnight demo --agent claude-code` (and `codex`): the real CLI, killed once during a tool
call, resumes its session in place (one attempt, no restart, the same session id before the
kill and after it), and its run ends in a pull request on the fake GitHub, whose URL the demo
prints last (overnight/demo/agent_demo.py). Through the command itself, the demo ends as the
plain demo does: the dev server it started is stopped and it says so, with no link to it. The
finished run's card has no stale fields (issue 51) and `overnight report` names its causes."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client

from activities.providers.local.isolation import bwrap_problem
from overnight.cli.report import collect
from overnight.cli.report_totals import EXPLAINED_CAUSES
from overnight.core.agent_kinds import agent_cli
from overnight.core.coding_agents import install_folder
from overnight.demo.agent_demo import run_agent_demo
from overnight.worker.agent_clis import Installed
from overnight.worker.devserver import DevServer
from overnight.worker.runner import serve
from tests.agent_clis.conftest import agents_home, installed_cli  # noqa: F401 (fixtures)
from tests.conftest import DEV_CONFIG_FILE, free_ports

REPO = Path(__file__).resolve().parents[2]
ADAPTER = REPO / "overnight" / "agent_kit" / "coding_agent.py"
OVERNIGHT = Path(sys.executable).with_name("overnight")
STOPPED = "the dev server is stopped now; `--keep-server` leaves it and the Web UI running"
PULL_REQUEST = re.compile(
    r"pull request: (http://127\.0\.0\.1:\d+/(demo-claude-code-[0-9a-z-]+)/origin/pull/1) "
    r"\(on the demo's fake GitHub, which ends with the demo: its title and body are in "
    r"(/\S+/pull-request\.md)\)"
)
CAUSES = {"crashed", "looped", "stalled", "sandbox_failed", "time_limit", "resumed", "other"}
CAUSES |= {"fresh_starts_used_up", *EXPLAINED_CAUSES}


def link_cli(
    installed_cli: Callable[[str], Installed],  # noqa: F811
    kind: str,
    home: Path | None,
) -> None:
    """The session's install of `kind`, in `home`'s agents folder (the session's by default)."""
    if not ADAPTER.is_file():
        pytest.skip(f"the adapter {ADAPTER.name} is not on this tree yet")
    if bwrap_problem() is not None:
        pytest.skip(f"coding agents run only in isolated sandboxes: {bwrap_problem()}")
    # Skipped by the fixture when the CLI is not installed and the npm registry is out of reach.
    installed = installed_cli(kind)
    place = install_folder(agent_cli(kind), home)
    place.parent.mkdir(parents=True, exist_ok=True)
    if not place.exists():
        place.symlink_to(installed.folder)


def dev_config_file(folder: Path) -> Path:
    """The repo's temporal-dev.yaml on free ports, with a database of its own."""
    settings = yaml.safe_load(DEV_CONFIG_FILE.read_text())
    port, ui_port = free_ports(2)
    settings |= {
        "port": port,
        "ui_port": ui_port,
        "db_file": str(folder / "dev.sqlite"),
        "log_file": str(folder / "dev-server.log"),
    }
    path = folder / "temporal-dev.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


async def card_of(client: Client, run_id: str) -> str:
    """A closed run's Web UI card, as the Web UI asks for it: a worker on the run's queue
    replays the run to answer (the demo's own worker is gone with it)."""
    handle = client.get_workflow_handle(run_id)
    queue = (await handle.describe()).task_queue
    ready, stop = asyncio.Event(), asyncio.Event()
    worker = asyncio.create_task(serve(client, task_queue=queue, ready=ready, stop=stop))
    try:
        await asyncio.wait_for(ready.wait(), timeout=60)
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    finally:
        stop.set()
        await asyncio.wait_for(worker, timeout=60)
    return metadata.current_details


def answers(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.long
@pytest.mark.timeout(420)
async def test_overnight_demo_agent_ends_with_the_server_stopped_and_the_pull_requests_url(
    installed_cli: Callable[[str], Installed],  # noqa: F811
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    link_cli(installed_cli, "claude-code", home)
    config = dev_config_file(tmp_path)
    settings = yaml.safe_load(config.read_text())
    process = await asyncio.create_subprocess_exec(
        str(OVERNIGHT),
        "demo",
        "--agent",
        "claude-code",
        "--config",
        str(config),
        cwd=tmp_path,
        env={**os.environ, "OVERNIGHT_HOME": str(home)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    stdout, _ = await asyncio.wait_for(process.communicate(), timeout=400)
    output = stdout.decode()
    lines = output.splitlines()
    assert process.returncode == 0, output
    assert "(started)" in output
    assert "finished after 1 attempt (0 restarts" in output
    assert "the same session, resumed in place" in output
    # It ends as the plain demo does, then names the pull request, last.
    assert lines[-2] == STOPPED, output
    found = PULL_REQUEST.fullmatch(lines[-1])
    assert found, output
    url, run_id, record = found.groups()
    assert f"\n  pull request: {url}\n" in output  # the run's result names it too
    # No link to the stopped server after the one printed while it ran.
    started_at = next(i for i, line in enumerate(lines) if line.startswith(f"started {run_id}"))
    link = lines[started_at + 1].removeprefix("Web UI: ")
    assert link.startswith(f"http://127.0.0.1:{settings['ui_port']}/"), output
    assert not [line for line in lines[started_at + 2 :] if "Web UI: " in line], output
    assert not answers(settings["port"])
    # What the reviewer would have read stays: the agent's summary as its title, the run's body.
    text = Path(record).read_text()
    assert text.startswith("# greet.py prints 'Hello, overnight'"), text
    assert f"{url} (draft, agent/{run_id} into main" in text
    assert "labels: -" in text
    assert f"Opened by overnight for the run [{run_id}]({link})" in text


async def test_the_agent_demo_resumes_the_same_session_and_its_finished_card_is_not_stale(
    dev_server: DevServer,
    dev_client: Client,
    installed_cli: Callable[[str], Installed],  # noqa: F811
) -> None:
    link_cli(installed_cli, "claude-code", None)  # linked into this session's $OVERNIGHT_HOME
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
    # A server of the session's: the link to the run while it stays up, the pull request last.
    assert lines[-2].startswith(f"Web UI: {dev_server.ui_url}/namespaces/"), output
    found = PULL_REQUEST.fullmatch(lines[-1])
    assert found, output
    run_id = found.group(2)

    # The finished run's card: nothing in it ages (`last progress 1s ago`), no lease.
    card = await card_of(dev_client, run_id)
    assert f"`{run_id}`: **finished**" in card, card
    assert re.search(r"^- \*\*last progress\*\* \d\d:\d\d:\d\d UTC$", card, re.M), card
    assert " ago" not in card and "lease ends" not in card, card
    assert f"- **pull request** <{found.group(1)}>" in card, card
    # Every restart cause the report counts is one it names (none here: no restart at all).
    report = await collect(dev_client, timedelta(hours=1), where=f"WorkflowId = '{run_id}'")
    assert report.runs == 1 and report.restarts == 0
    assert set(report.restarts_by_cause) <= CAUSES


@pytest.mark.long
async def test_the_codex_demo_resumes_its_session_and_a_kept_server_is_linked_before_the_pr(
    dev_server: DevServer,
    installed_cli: Callable[[str], Installed],  # noqa: F811
) -> None:
    link_cli(installed_cli, "codex", None)
    lines: list[str] = []
    code = await run_agent_demo(
        "codex", keep_server=True, config=dev_server.config, out=lines.append
    )
    output = "\n".join(lines)
    assert code == 0, output
    assert "finished after 1 attempt (0 restarts" in output
    assert "the same session, resumed in place" in output
    assert re.search(r"^  [0-9a-f]+ step \d+: apply_patch greet.py$", output, re.M), output
    # Kept: the server's line, then the link to the run on it, then the pull request.
    assert lines[-3] == f"dev server left running at {dev_server.address}", output
    assert lines[-2].startswith(f"Web UI: {dev_server.ui_url}/namespaces/"), output
    assert re.fullmatch(
        r"pull request: http://127\.0\.0\.1:\d+/demo-codex-[0-9a-z-]+/origin/pull/1 \(.*\)",
        lines[-1],
    ), output
