"""Per crash, on the real stack (a dev server, a worker in this process, real sandboxes): the
run of an agent that pushes only at its end, crashed after a step, without and with
`keep_workspace`; what the fresh sandbox lost and what keeping added to the run's history.
Apart from the per-checkpoint measure of bench/workspace_kept.py, which needs no server."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from activities.providers.local.engine import LocalEngine
from bench.procs import dev_server
from bench.workspace_world import AGENT, Plan, git, make_origin
from fakes.git_http import origin_fields
from overnight.cli import client as api
from overnight.core.constants import LABEL_RUN
from overnight.core.grants import Grants
from overnight.core.models import RunSpec
from overnight.worker.runner import serve


def crash_spec(root: Path, keep: bool, plan: Plan) -> RunSpec:
    run_id = f"keepcrash-{'on' if keep else 'off'}-{uuid.uuid4().hex[:6]}"
    origin = make_origin(root / run_id, 1)
    return RunSpec.model_validate(
        {
            "run_id": run_id,
            **origin_fields(origin, "local"),
            "agent_dir": str(AGENT),
            "command": "python3 /workspace/agent/main.py",
            "env": {
                "AGENT_STEPS": str(plan.steps),
                "AGENT_CRASH_AT": str(plan.crash_at),
                "AGENT_HOLD": str(plan.hold),
            },
            "poll_seconds": 1,
            "stall_seconds": 120,
            "sandbox_timeout_seconds": 600,
            "keep_workspace": keep,
        }
    )


async def crash_run(client: Client, queue: str, spec: RunSpec, plan: Plan) -> dict[str, Any]:
    await api.start_run(client, spec, task_queue=queue)
    result = await asyncio.wait_for(api.wait_result(client, spec.run_id), timeout=600)
    final = json.loads(result.checkpoint or "{}")
    found_again = final["found"].get("2", [])
    wrote = [f"step-{k}.txt" for k in range(1, plan.crash_at + 1)]
    lost = [name for name in wrote if name not in found_again]
    history = await client.get_workflow_handle(spec.run_id).fetch_history()
    # The crashed attempt's sandbox was kept paused for a look: not needed here.
    engine = LocalEngine()
    for meta in engine.list_sandboxes({LABEL_RUN: spec.run_id}, include_stopped=False):
        await asyncio.to_thread(engine.stop, meta.id)
    pushed = git(Path(spec.repo), "ls-tree", "--name-only", spec.branch)
    return {
        "keep_workspace": spec.keep_workspace,
        "attempts": result.attempts,
        "lost_steps": len(lost),
        "lost_seconds": round(len(lost) * plan.hold, 2),
        "steps_on_branch": sum(1 for name in pushed.split() if name.startswith("step-")),
        "history_events": len(history.events),
        "checkpoints": plan.steps,
    }


async def measure_crashes(
    root: Path, plan: Plan, server: tuple[str, str] | None
) -> list[dict[str, Any]]:
    """The crash run without, then with, keeping; on a dev server of its own unless given
    (`server`: its address and namespace)."""
    if server is not None:
        address, namespace = server
        client = await Client.connect(
            address, namespace=namespace, data_converter=pydantic_data_converter
        )
        return await _crashes_on(client, root, plan)
    (root / "dev").mkdir()
    async with dev_server(root / "dev") as own:
        client = await Client.connect(
            own.address, namespace=own.namespace, data_converter=pydantic_data_converter
        )
        return await _crashes_on(client, root, plan)


async def _crashes_on(client: Client, root: Path, plan: Plan) -> list[dict[str, Any]]:
    queue = f"keepbench-{uuid.uuid4().hex[:8]}"
    ready, stop = asyncio.Event(), asyncio.Event()
    grants = Grants(writable_bind_roots=(str(root.resolve()),))
    worker = asyncio.create_task(
        serve(client, task_queue=queue, ready=ready, stop=stop, grants=grants)
    )
    try:
        await asyncio.wait_for(ready.wait(), timeout=60)
        return [
            await crash_run(client, queue, crash_spec(root, keep, plan), plan)
            for keep in (False, True)
        ]
    finally:
        stop.set()
        await asyncio.wait_for(worker, timeout=60)
