"""Runs that cannot succeed say so at once, on the real dev server with real local sandboxes:
a repository that does not exist, an `agent_dir` not on the worker, a command not found; each
fails in seconds with one line saying what to fix and to start again. A git server that
refuses connections for a while is waited for, and meanwhile `overnight status` says what the
run waits on."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from fakes.git_http import git_path, git_url, serve_on
from overnight.cli import client as api
from overnight.core.errors import SPEC_UNUSABLE
from overnight.core.isolation import HostBind
from overnight.core.local_services import serve_to_agents
from overnight.core.models import RunSpec
from overnight.demo.sample_demo import make_origin
from overnight.worker.devserver import DevServer
from tests.conftest import free_port
from tests.e2e.helpers import new_run_id
from tests.e2e.test_cli_live import overnight
from tests.waits import CAP

AGAIN = "no retry can fix this: fix the spec (or the worker) and start the run again"
NO_ANSWER = ("connection refused", "the server did not answer (connection reset)")
# Seconds within which a hopeless run has failed (an hour of retries, before).
AT_ONCE = 30


def _agent(root: Path) -> Path:
    """An agent that writes its checkpoint and is done."""
    agent = root / "agent"
    agent.mkdir(exist_ok=True)
    (agent / "done.sh").write_text('echo \'{"next": "nothing"}\' > "$OVERNIGHT_CHECKPOINT"\n')
    return agent


def _spec(run_id: str, root: Path, repo: str, port: int | None, **changes: Any) -> RunSpec:
    fields: dict[str, Any] = {
        "run_id": run_id,
        "repo": repo,
        "agent_dir": str(_agent(root)),
        "command": "bash /workspace/agent/done.sh",
        "poll_seconds": 1,
        "stall_seconds": 30,
        "sandbox_timeout_seconds": 120,
        "host_ports": [port] if port is not None else [],
        **changes,
    }
    if port is not None:
        serve_to_agents(port)  # the worker in this process vouches for the git server's port
    return RunSpec.model_validate(fields)


async def _failure(client: Client, run_id: str) -> tuple[ApplicationError, float]:
    began = time.monotonic()
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(api.wait_result(client, run_id), timeout=AT_ONCE)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    return cause, time.monotonic() - began


@pytest.mark.timeout(90)
async def test_a_repository_that_does_not_exist_fails_the_run_at_once(
    dev_client: Client, task_queue: str, runs: list[str], tmp_path: Path
) -> None:
    origin = make_origin(tmp_path / "o").origin
    served = urlsplit(git_url(origin))
    repo = f"http://{served.netloc}/no-such-token/{origin.name}"  # the server answers 404
    run_id = new_run_id("no-repo")
    runs.append(run_id)
    await api.start_run(
        dev_client, _spec(run_id, tmp_path, repo, served.port), task_queue=task_queue
    )
    cause, took = await _failure(dev_client, run_id)
    status = await api.get_status(dev_client, run_id)

    assert cause.type == SPEC_UNUSABLE and took < AT_ONCE
    assert cause.message.startswith(
        f"run {run_id} cannot start: field repo: cloning {repo}: repository not found "
        f"(fatal: repository '{repo}/' not found); "
    ), cause.message
    assert cause.message.endswith(AGAIN)
    assert (status.state, status.failure, status.restarts_used) == ("failed", cause.message, 0)


@pytest.mark.timeout(90)
async def test_an_agent_dir_not_on_the_worker_fails_the_run_at_once(
    dev_client: Client, task_queue: str, runs: list[str], tmp_path: Path
) -> None:
    origin = make_origin(tmp_path / "o").origin
    run_id = new_run_id("no-agent-dir")
    runs.append(run_id)
    spec = _spec(run_id, tmp_path, str(origin), None, agent_dir=str(tmp_path / "nowhere"))
    await api.start_run(dev_client, spec, task_queue=task_queue)
    cause, took = await _failure(dev_client, run_id)
    status = await api.get_status(dev_client, run_id)

    assert cause.type == SPEC_UNUSABLE and took < AT_ONCE
    assert cause.message == (
        f"run {run_id} cannot start: field agent_dir: {tmp_path}/nowhere is not a folder on "
        f"this worker; {AGAIN}"
    )
    assert (status.state, status.failure, status.restarts_used) == ("failed", cause.message, 0)


@pytest.mark.timeout(90)
async def test_a_command_not_found_fails_once_and_spends_no_restart(
    dev_client: Client, task_queue: str, runs: list[str], tmp_path: Path
) -> None:
    origin = make_origin(tmp_path / "o").origin
    run_id = new_run_id("typo")
    runs.append(run_id)
    spec = _spec(run_id, tmp_path, str(origin), None, command="pyhton3 /workspace/agent/x.py")
    spec = spec.model_copy(update={"binds": [HostBind(path=str(origin))]})
    await api.start_run(dev_client, spec, task_queue=task_queue)
    cause, took = await _failure(dev_client, run_id)
    status = await api.get_status(dev_client, run_id)

    assert cause.type == SPEC_UNUSABLE and took < AT_ONCE
    assert cause.message.startswith(
        f"run {run_id}: the agent's command was not found (exit 127 at its first start, before "
        "any checkpoint; field command: pyhton3 /workspace/agent/x.py); it said: "
    ), cause.message
    assert "pyhton3" in cause.message.split("it said: ", 1)[1]
    assert cause.message.endswith(AGAIN)
    assert (status.state, status.attempt, status.restarts_used) == ("failed", 1, 0)


async def test_a_git_server_that_refuses_for_a_while_is_waited_for_and_status_says_so(
    dev_client: Client, dev_server: DevServer, task_queue: str, runs: list[str], tmp_path: Path
) -> None:
    origin = make_origin(tmp_path / "o").origin
    port = free_port()
    repo = f"http://127.0.0.1:{port}{git_path(origin)}"  # nothing listens there yet
    run_id = new_run_id("git-later")
    runs.append(run_id)
    await api.start_run(dev_client, _spec(run_id, tmp_path, repo, port), task_queue=task_queue)
    shown = ""
    # Caps, not speeds: nothing listens until the server below starts, so the create keeps
    # retrying and the status keeps saying so (16 tries, ~1 h) until it is seen.
    give_up = time.monotonic() + CAP
    while "waiting on:" not in shown and time.monotonic() < give_up:
        await asyncio.sleep(0.5)
        shown = (await overnight(dev_server, "status", run_id)).stdout
    listed = (await overnight(dev_server, "list", "--open")).stdout
    card = ""
    while "waiting on" not in card and time.monotonic() < give_up:
        metadata = await dev_client.get_workflow_handle(run_id).query(
            "__temporal_workflow_metadata", result_type=WorkflowMetadata
        )
        card = metadata.current_details
        await asyncio.sleep(0.3)
    server = serve_on(port)
    try:
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=CAP)
    finally:
        server.shutdown()
        server.server_close()

    assert "waiting on:" in shown, shown
    line = next(line for line in shown.splitlines() if "waiting on:" in line)
    assert line.startswith("  waiting on:    create sandbox, try "), shown
    assert " of 16, " in line and f"cloning {repo}: " in line, line
    # Refused on the host; through an isolated sandbox's network relay, a reset.
    assert any(f"{repo}: {words} (" in line for words in NO_ANSWER), line
    assert "  waiting on: create sandbox, try " in listed, listed
    # The card (User Metadata -> Current Details) says it too, from the create's own note.
    assert "- **waiting on** create sandbox, try " in card and " of 16, next at " in card, card
    assert result.outcome == "finished" and result.restarts == 0
