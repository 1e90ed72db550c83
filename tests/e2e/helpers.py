"""Shared pieces of the end-to-end tests: specs for the sample agent, waiting, process checks."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client

from fakes.git_http import origin_fields
from overnight.cli import client as api
from overnight.core.models import RunSpec, RunStatus
from overnight.demo.outside_world import host_ports_for, ledger_url
from overnight.demo.sample_demo import AGENT_DIR, DemoFiles, make_origin
from tests.waits import CAP


def new_run_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def agent_spec(
    run_id: str, root: Path, *, agent_env: dict[str, str] | None = None, **changes: Any
) -> tuple[RunSpec, DemoFiles]:
    """A spec running the real sample agent against a fresh bare origin under `root`, served
    as its provider can reach it, with its ledger behind the loopback outside world."""
    files = make_origin(root / run_id)
    fields: dict[str, Any] = {
        "run_id": run_id,
        **origin_fields(files.origin, changes.get("provider", "local")),
        "agent_dir": str(AGENT_DIR),
        "command": "python3 /workspace/agent/main.py --resume /workspace/checkpoint.json",
        "env": {"OVERNIGHT_LEDGER_URL": ledger_url(files.ledger), **(agent_env or {})},
        "poll_seconds": 1,
        "stall_seconds": 10,
        "sandbox_timeout_seconds": 120,
    }
    fields.update(changes)
    ledger = fields["env"].get("OVERNIGHT_LEDGER_URL")
    fields.setdefault("host_ports", host_ports_for(ledger, fields.get("provider", "local")))
    return RunSpec.model_validate(fields), files


async def wait_for_status(
    client: Client, run_id: str, ok: Callable[[RunStatus], bool], timeout: float = CAP
) -> RunStatus:
    deadline = time.monotonic() + timeout
    last: RunStatus | None = None
    while time.monotonic() < deadline:
        try:
            last = await api.get_status(client, run_id)
        except api.OvernightError:
            last = None
        if last is not None and ok(last):
            return last
        await asyncio.sleep(0.3)
    raise AssertionError(f"{run_id}: condition not met in {timeout}s; last status {last}")


def agent_pids(run_id: str) -> list[int]:
    """Live processes started for `run_id` (they carry OVERNIGHT_RUN_ID in their environment)."""
    marker = f"OVERNIGHT_RUN_ID={run_id}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and marker in environ.split(b"\0"):
            found.append(int(proc.name))
    return found


async def wait_no_agent_processes(run_id: str, timeout: float = CAP) -> list[int]:
    deadline = time.monotonic() + timeout
    while (pids := agent_pids(run_id)) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    return pids
