"""Real runs for the console's tests: the console test agent (tests/agents/console) on the local
provider, in the states the list orders (running, waiting for an answer, needing attention)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio.client import Client

from fakes.git_http import origin_fields
from overnight.cli import client as api
from overnight.core.models import RunSpec, RunStatus
from overnight.demo.sample_demo import make_origin
from tests.e2e.helpers import wait_for_status

CONSOLE_AGENT = Path(__file__).resolve().parents[1] / "agents" / "console"


def console_spec(run_id: str, root: Path, mode: str, **changes: Any) -> RunSpec:
    env = {"CONSOLE_MODE": mode, **changes.pop("env", {})}
    files = make_origin(root / run_id)
    return RunSpec.model_validate(
        {
            "run_id": run_id,
            **origin_fields(files.origin, "local"),
            "agent_dir": str(CONSOLE_AGENT),
            "command": "python3 /workspace/agent/main.py",
            "env": env,
            "poll_seconds": 1,
            "stall_seconds": 120,
            "sandbox_timeout_seconds": 300,
            **changes,
        }
    )


def in_state(state: str) -> Any:
    def check(status: RunStatus) -> bool:
        return status.state == state

    return check


async def start_in_state(
    client: Client, queue: str, spec: RunSpec, state: str, timeout: float = 90
) -> RunStatus:
    await api.start_run(client, spec, task_queue=queue)
    return await wait_for_status(client, spec.run_id, in_state(state), timeout=timeout)
