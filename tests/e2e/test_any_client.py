"""AgentRun driven by clients that are not overnight's own: a plain `temporalio` client (with
and without the pydantic data converter) and the stock `temporal` CLI. A bad spec fails the
run at once as `InvalidSpec` naming its fields; a spec without a run id takes it from the
workflow id, as a Temporal Schedule's firing needs."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from overnight.cli import client as api
from overnight.core.intake import derive_run_id
from overnight.core.models import RunResult, RunSpec
from overnight.worker.devserver import DevServer
from tests.e2e.helpers import agent_spec, wait_for_status
from tests.e2e.test_cli_live import overnight
from tests.e2e.test_stock_cli import temporal
from tests.waits import CAP

BAD_SHAPES: list[tuple[str, Any]] = [
    ("secret_env", {"TOKEN": "x"}),
    ("sandbox_timeout_seconds", "an hour"),
]


def raw_spec(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    spec, _ = agent_spec(f"raw-{uuid.uuid4().hex[:6]}", tmp_path)
    raw = spec.model_dump(mode="json")
    raw.pop("branch")  # defaults from the run id
    raw.update(changes)
    return raw


async def failed_as_invalid_spec(client: Client, workflow_id: str) -> ApplicationError:
    handle = client.get_workflow_handle(workflow_id)
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), timeout=CAP)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError), cause
    assert cause.type == "InvalidSpec" and cause.non_retryable
    assert (await handle.describe()).status == WorkflowExecutionStatus.FAILED
    return cause


@pytest.mark.parametrize("pydantic", [True, False], ids=["pydantic", "plain-json"])
async def test_a_wrongly_shaped_spec_from_a_plain_client_fails_at_once_naming_every_field(
    dev_server: DevServer,
    dev_client: Client,
    task_queue: str,
    tmp_path: Path,
    runs: list[str],
    pydantic: bool,
) -> None:
    client = (
        dev_client
        if pydantic
        else await Client.connect(dev_server.address, namespace=dev_server.namespace)
    )
    raw = raw_spec(tmp_path, **dict(BAD_SHAPES))
    workflow_id = raw["run_id"]
    runs.append(workflow_id)
    began = time.monotonic()
    await client.start_workflow("AgentRun", raw, id=workflow_id, task_queue=task_queue)
    refused = await failed_as_invalid_spec(dev_client, workflow_id)
    assert time.monotonic() - began < 15
    message = str(refused.message)
    assert len(message.splitlines()) == 1
    for field, _ in BAD_SHAPES:
        assert f"field {field}" in message, message


async def test_a_relative_agent_dir_from_a_plain_client_fails_at_once_saying_why(
    dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    # A plain client has no spec file, so no folder a relative path could be taken from.
    raw = raw_spec(tmp_path, agent_dir="agent")
    workflow_id = raw["run_id"]
    runs.append(workflow_id)
    await dev_client.start_workflow("AgentRun", raw, id=workflow_id, task_queue=task_queue)
    refused = await failed_as_invalid_spec(dev_client, workflow_id)
    assert (
        "field agent_dir: 'agent' is a relative path, and a spec built in code has no folder"
    ) in str(refused.message)


async def test_a_bad_spec_started_with_the_stock_cli_shows_failed_with_the_field_named(
    dev_server: DevServer, dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    raw = raw_spec(tmp_path, secret_env={"TOKEN": "x"})
    workflow_id = raw["run_id"]
    runs.append(workflow_id)
    await temporal(
        dev_server,
        "workflow",
        "start",
        "--type",
        "AgentRun",
        "--task-queue",
        task_queue,
        "--workflow-id",
        workflow_id,
        "--input",
        json.dumps(raw),
    )
    refused = await failed_as_invalid_spec(dev_client, workflow_id)
    assert "field secret_env" in str(refused.message)
    shown = json.loads(
        await temporal(dev_server, "workflow", "describe", "-w", workflow_id, "-o", "json")
    )
    assert "FAILED" in json.dumps(shown["workflowExecutionInfo"]["status"]).upper()


async def test_a_run_id_that_names_another_run_is_refused(
    dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    raw = raw_spec(tmp_path)
    workflow_id = f"other-{uuid.uuid4().hex[:6]}"
    runs.append(workflow_id)
    await dev_client.start_workflow("AgentRun", raw, id=workflow_id, task_queue=task_queue)
    refused = await failed_as_invalid_spec(dev_client, workflow_id)
    assert "field run_id" in str(refused.message) and workflow_id in str(refused.message)


async def test_a_spec_without_run_id_takes_it_from_the_workflow_id(
    dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    raw = raw_spec(tmp_path)
    del raw["run_id"]
    workflow_id = f"Nightly Fix-{uuid.uuid4().hex[:6]}-2026-11-30T01:00:00Z"
    runs.append(workflow_id)
    handle = await dev_client.start_workflow(
        "AgentRun", raw, id=workflow_id, task_queue=task_queue, result_type=RunResult
    )
    status = await wait_for_status(dev_client, workflow_id, lambda s: s.sandbox_id is not None)
    run_id = status.run_id
    assert run_id.startswith("nightly-fix-") and len(run_id) <= 63
    assert run_id == run_id.lower() and all(c.isalnum() or c == "-" for c in run_id)
    assert status.sandbox_id is not None and status.sandbox_id.startswith(run_id)
    result = await asyncio.wait_for(handle.result(), timeout=60)
    assert (result.run_id, result.outcome) == (run_id, "finished")


async def test_overnight_start_names_a_run_whose_spec_has_no_run_id(
    dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    raw = raw_spec(tmp_path)
    del raw["run_id"]
    handle = await api.start_run(dev_client, RunSpec.model_validate(raw), task_queue=task_queue)
    runs.append(handle.id)
    assert re.fullmatch(r"run-\d{8}-\d{6}-[0-9a-f]{4}", handle.id)
    status = await wait_for_status(dev_client, handle.id, lambda s: s.state != "starting")
    assert status.run_id == handle.id


async def test_every_command_takes_the_run_id_and_the_workflow_id_alike(
    dev_server: DevServer, dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    raw = raw_spec(tmp_path)
    del raw["run_id"]
    workflow_id = f"Newbie From Python {uuid.uuid4().hex[:6]}"
    runs.append(workflow_id)
    handle = await dev_client.start_workflow(
        "AgentRun", raw, id=workflow_id, task_queue=task_queue, result_type=RunResult
    )
    status = await wait_for_status(dev_client, workflow_id, lambda s: s.sandbox_id is not None)
    run_id = status.run_id
    assert run_id != workflow_id
    for name in (run_id, workflow_id):
        shown = await overnight(dev_server, "status", name)
        assert shown.returncode == 0, shown.stderr
        assert run_id in shown.stdout
    result = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.outcome == "finished"


async def test_a_run_without_a_sandbox_yet_is_found_by_its_run_id(
    dev_server: DevServer, dev_client: Client, tmp_path: Path, runs: list[str]
) -> None:
    raw = raw_spec(tmp_path)
    del raw["run_id"]
    workflow_id = f"Queued For Nobody {uuid.uuid4().hex[:6]}"
    runs.append(workflow_id)
    # No worker polls this queue: the run never gets a sandbox (nor a search attribute).
    await dev_client.start_workflow(
        "AgentRun", raw, id=workflow_id, task_queue=f"nobody-{uuid.uuid4().hex[:6]}"
    )
    run_id = derive_run_id(workflow_id)
    # Visibility is eventually consistent: the CLI finds runs there (a cap, not a bound).
    async with asyncio.timeout(CAP):
        while not [w async for w in dev_client.list_workflows(f"WorkflowId = '{workflow_id}'")]:
            await asyncio.sleep(0.2)
    asked = await overnight(dev_server, "cancel", run_id, "--reason", "found by its run id")
    assert (asked.returncode, asked.stdout) == (0, f"asked {run_id} to cancel\n"), asked.stderr
    history = [
        event async for event in dev_client.get_workflow_handle(workflow_id).fetch_history_events()
    ]
    assert any(event.HasField("workflow_execution_signaled_event_attributes") for event in history)
    missing = await overnight(dev_server, "status", "no-such-run-0123abcd")
    assert missing.returncode == 1
    assert "no run 'no-such-run-0123abcd' in this namespace" in missing.stderr
