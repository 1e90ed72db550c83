"""An agent that writes a secret into its checkpoint does not put it into the run's history:
the worker redacts every value of the run's `secret_env` from the checkpoint it reads (as
written, and as JSON escapes it) before the text leaves the worker, so the status, the
result and the history, which hold only what the activities sent, never hold it.

Real local sandboxes: the agent gets the secret in its environment, as `secret_env` gives it,
and writes it into its checkpoint with Python's json (quotes and non-ASCII escaped)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from activities.models import ObserveInput
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import AgentLaunch
from activities.sandbox.observe import observe
from activities.sandbox_base.checkpoints import read_checkpoint
from overnight.cli import client as api
from overnight.core.output_tail import REDACTED
from tests.live import (
    granted,
    history_text,
    in_process_worker,
    new_run_id,
    nothing_left_running,
    scripted_spec,
    task_failures,
)
from tests.providers.test_behaviour import request
from tests.waits import CAP

CHECKPOINT = "/workspace/checkpoint.json"
SECRET = 'sk-live-"quoted"\\back-é-0123456789'
WRITER = (
    'python3 -c \'import json, os; s = os.environ["DEPLOY_TOKEN"]; '
    'open("/workspace/.cp", "w").write(json.dumps('
    '{"next": "push with " + s, "notes": ["used " + s], "token": s})); '
    'os.replace("/workspace/.cp", "/workspace/checkpoint.json")\''
)


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LocalProvider]:
    provider = LocalProvider(LocalEngine(tmp_path / "home"))
    try:
        yield provider
    finally:
        for info in await provider.list({}, include_stopped=False):
            await provider.stop(info.sandbox_id)


def carried(value: object) -> bytes:
    """The bytes the value would take in workflow history."""
    [payload] = pydantic_data_converter.payload_converter.to_payloads([value])
    return payload.data


def leaks(data: bytes | str) -> list[str]:
    text = data.decode() if isinstance(data, bytes) else data
    pieces = [SECRET, "0123456789", '\\"quoted\\"', "sk-live-"]
    return [piece for piece in pieces if piece in text]


async def test_a_secret_the_agent_writes_into_its_checkpoint_never_leaves_the_worker(
    local: LocalProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEPLOY_TOKEN", SECRET)  # the worker's environment
    info, _ = await local.get_or_create(request(f"secret-{uuid.uuid4().hex[:10]}"))
    sid = info.sandbox_id
    agent = await local.start_agent(
        sid,
        AgentLaunch(
            start_key="secret-1-0",
            command=WRITER + "; sleep 1",
            cwd="/workspace",
            env={"DEPLOY_TOKEN": SECRET},
        ),
    )
    watch = ObserveInput(
        provider="local",
        sandbox_id=sid,
        process_id=agent.process_id,
        checkpoint_path=CHECKPOINT,
        max_checkpoint_bytes=10_000,
        wait_seconds=10,
        secret_env=["DEPLOY_TOKEN"],
    )
    seen = await asyncio.wait_for(observe(local, watch, 10), timeout=CAP)
    # What the worker reads at the end (`read_checkpoint`), from the same file.
    final = await read_checkpoint(local, sid, CHECKPOINT, 10_000, None, secret_env=["DEPLOY_TOKEN"])

    assert "sk-live-" in local.engine.host_path(sid, CHECKPOINT).read_text()  # as written
    read = seen.checkpoint
    assert read is not None and read.status == "ok" and read.text is not None
    assert leaks(carried(seen)) == [] and leaks(carried(final)) == []
    assert read.text.count(REDACTED) == 3
    assert read.facts is not None and read.facts.summary is not None
    assert read.facts.summary.next == f"push with {REDACTED}"
    assert read.facts.summary.last_note == f"used {REDACTED}"
    assert read.facts.is_json  # still JSON: the next sandbox can resume from it


async def test_a_checkpoint_without_secrets_is_sent_as_written(local: LocalProvider) -> None:
    info, _ = await local.get_or_create(request(f"plain-{uuid.uuid4().hex[:10]}"))
    text = '{"next": "write tests", "notes": ["sk-live is a prefix, not a secret"]}'
    local.engine.host_path(info.sandbox_id, CHECKPOINT).write_text(text)
    read = await read_checkpoint(local, info.sandbox_id, CHECKPOINT, 10_000, None)
    assert read.text == text


async def test_a_secret_in_the_checkpoint_is_in_no_status_result_or_history(
    dev_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, secret = "CHECKPOINT_LEAK_TOKEN", f"tok-{uuid.uuid4().hex}"
    monkeypatch.setenv(name, secret)  # the in-process worker's environment
    run_id = new_run_id("cp-secret")
    spec = scripted_spec(
        run_id, tmp_path, "secret-in-checkpoint", secret_env=[name], env={"AGENT_SECRET_NAME": name}
    )
    grants = granted(secret_env=[name])
    async with (
        nothing_left_running(dev_client) as runs,
        in_process_worker(dev_client, grants=grants) as queue,
    ):
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=60)
        status = await api.get_status(dev_client, run_id)
        history = await history_text(dev_client, run_id)

    assert result.outcome == "finished"
    assert result.checkpoint == json.dumps(
        {"step": 1, "next": f"push with {REDACTED}", "notes": [f"token {REDACTED}"]}
    )
    assert status is not None and status.checkpoint_summary is not None
    assert status.checkpoint_summary.next == f"push with {REDACTED}"
    assert secret not in status.model_dump_json()
    assert secret not in history
    assert await task_failures(dev_client, run_id) == []
