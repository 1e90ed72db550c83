"""Coding agents (`RunSpec.agent`) run end to end on the real dev server with a real worker and
the local provider: the real pinned Claude Code CLI, run by overnight's adapter against the
scripted fake model API (fakes/model_api), finishes a three-tool-call task in one attempt, its
work on the run's branch on the origin and its spend in the status; and a run whose kind's CLI
this worker has not installed fails at once, with the one line that says what fixes it,
before any sandbox exists."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from fakes.model_api import FakeModelApi, ReadFile, Shell, WriteFile, text, tools
from fakes.model_api.turns import Answer
from overnight.cli import client as api
from overnight.core.agent_kinds import agent_cli
from overnight.core.coding_agents import INSTALL_SCRIPT
from overnight.core.constants import LABEL_RUN
from overnight.core.grants import SPEC_REFUSED
from overnight.core.home import HOME_ENV, overnight_home
from overnight.core.models import RunSpec
from overnight.worker.agent_clis import Installed
from overnight.worker.devserver import DevServer
from tests.agent_clis.conftest import agents_home, installed_cli  # noqa: F401 (fixtures)
from tests.e2e.coding_agent_runs import (
    CREDENTIAL,
    FAKE_KEY,
    agents_queue,  # noqa: F401 (a fixture)
    claude_code,  # noqa: F401 (a fixture)
    start_coding_run,
)
from tests.e2e.helpers import new_run_id
from tests.live import worker_process
from tests.waits import CAP


async def test_a_run_whose_cli_is_not_installed_fails_at_once_saying_the_fix(
    dev_client: Client, dev_server: DevServer, runs: list[str], tmp_path: Path
) -> None:
    home = tmp_path / "home-without-clis"
    kind = "claude-code"
    cli = agent_cli(kind)
    run_id = new_run_id("no-cli")
    runs.append(run_id)
    spec = RunSpec(
        run_id=run_id,
        repo="https://example.com/app.git",
        agent={"kind": kind, "prompt": "Make the tests pass"},
    )
    # A worker of its own: the session's share a home into which other tests of the process
    # may have installed both kinds, and this one's home has no coding agent's CLI.
    queue = new_run_id("no-clis")
    home.mkdir()
    async with worker_process(dev_server, queue, home / "worker.log", {HOME_ENV: str(home)}):
        await api.start_run(dev_client, spec, task_queue=queue)
        with pytest.raises(WorkflowFailureError) as caught:
            await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=CAP)
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == SPEC_REFUSED
    assert cause.message == (
        f"spec: field agent: {kind} {cli.version} is not installed on this worker "
        f"({cli.npm_spec} is not in {home / 'agents'}): run {INSTALL_SCRIPT} there"
    )
    # At once: refused before the run scheduled any activity or timer, and no sandbox made.
    kinds = {
        EventType.Name(event.event_type)
        async for event in dev_client.get_workflow_handle(run_id).fetch_history_events()
    }
    waits = {"EVENT_TYPE_ACTIVITY_TASK_SCHEDULED", "EVENT_TYPE_TIMER_STARTED"}
    assert kinds & waits == set(), kinds
    assert (
        await LocalProvider(LocalEngine(home)).list({LABEL_RUN: run_id}, include_stopped=True) == []
    )


# ----- the real Claude Code CLI -----


async def test_claude_code_finishes_a_three_tool_call_task_in_one_attempt(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    claude_code: Installed,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CREDENTIAL, FAKE_KEY)
    notes = "/workspace/app/notes.txt"
    script: list[Answer] = [
        tools(WriteFile(notes, "hello from the fake\n"), label="write"),
        tools(Shell("wc -c < notes.txt"), label="run"),
        tools(ReadFile(notes), label="read"),
        text("All three done.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        spec, files = await start_coding_run(
            dev_client,
            agents_queue,
            runs,
            tmp_path,
            fake,
            "claude",
            prompt="Write notes.txt, count its bytes, read it back.",
        )
        run_id = spec.run_id
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=240)
        status = await api.get_status(dev_client, run_id)
        requests = fake.requests()

    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert [r.label for r in requests] == ["write", "run", "read", "final"]
    assert len(set(fake.session_ids())) == 1 and fake.script.unmatched == []
    # Its work is on the run's branch on the origin, not only in the sandbox.
    shown = subprocess.run(
        ["git", "-C", str(files.origin), "show", f"{spec.branch}:notes.txt"],
        capture_output=True,
        text=True,
    )
    assert shown.returncode == 0 and shown.stdout == "hello from the fake\n", shown.stderr
    # Its spend (Claude Code's own estimate) is in the status.
    assert status.spend_model_usd > 0 and status.spend_usd >= status.spend_model_usd
    assert FAKE_KEY not in status.model_dump_json() and FAKE_KEY not in (result.checkpoint or "")
    # History holds the session's id, never its transcript: that was in the run's session
    # store, outside the agent's sandbox, which the run's end freed.
    [session_id] = set(fake.session_ids())
    print(f"\ncheckpoint: {result.checkpoint}")
    assert session_id in (result.checkpoint or "") and "hello from the fake" not in (
        result.checkpoint or ""
    )
    assert not (overnight_home() / "sessions" / run_id).exists()
