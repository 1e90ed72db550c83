"""On a machine with no cgroup to freeze, a pause never leaves an agent running: on the real
stack (the session's dev server, a worker in this process, real agent processes), the asking
agent's question pauses its sandbox by ending the agent (files kept), and the answer starts it
again in the same sandbox from its checkpoint, where it asks again and finds the answer. No
restart is counted, and the status line says why the pause ends agents here."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from activities.providers.local.engine import LocalEngine
from overnight.cli import client as api
from overnight.worker.devserver import DevServer
from tests.e2e.helpers import wait_for_status
from tests.e2e.test_asking import asking_spec
from tests.live import new_run_id, provider_world


@pytest.mark.timeout(150)
async def test_a_question_ends_the_agent_and_the_answer_starts_it_again_from_its_checkpoint(
    dev_server: DevServer,
    dev_client: Client,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OVERNIGHT_SANDBOX_CGROUPS", "none")
    run_id = new_run_id("ask-nocg")
    spec = asking_spec(run_id, tmp_path, "local")
    async with provider_world(dev_client, "local", tmp_path) as (queue, _, runs):
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        waiting = await wait_for_status(
            dev_client, run_id, lambda s: s.state == "waiting_for_answer", timeout=60
        )
        await dev_client.get_workflow_handle(run_id).execute_update(
            "answer", "yes", result_type=str
        )
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=60)
        status = await api.get_status(dev_client, run_id)

    assert waiting.isolation is not None and "a pause ends its agents" in waiting.isolation
    checkpoint: dict[str, Any] = json.loads(result.checkpoint or "{}")
    assert checkpoint["answer"] == "yes"
    # Another process went on, in the same sandbox, from the checkpoint: no restart.
    assert waiting.sandbox_id is not None
    started = sorted(
        p.name for p in (LocalEngine().folder(waiting.sandbox_id) / "processes").iterdir()
    )
    assert started == [f"{run_id}-1-0", f"{run_id}-1-0-p1"]
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert (status.restarts_used, status.fresh_starts_used) == (0, 0)
