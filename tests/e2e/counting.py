"""Runs of the counting agent (tests/agents/counting) for the lease and watching tests.

- `counting_spec`: a RunSpec for it on either provider, with its ledger behind the loopback
  outside world; every step it does is one entry in the ledger.
- `steps_done`: how many times each step was done, from the ledger.
- `worker_on`: a worker in this process on a given task queue, so a test can stop it and start
  another on the same queue (a worker going away and coming back).
- `sandbox_state`, `agent_frozen`, `until`: looking behind the provider's back.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.client import Client

from activities.providers.local.cgroup_mounts import mounts
from activities.providers.local.engine import LocalEngine
from fakes.git_http import origin_fields
from overnight.core.models import RunSpec
from overnight.demo.outside_world import host_ports_for, ledger_url
from overnight.demo.sample_demo import ledger_entries, make_origin
from overnight.worker.runner import serve
from tests.e2e.helpers import agent_pids
from tests.live import granted
from tests.waits import CAP

COUNTING_AGENT = Path(__file__).resolve().parent.parent / "agents" / "counting"


def counting_spec(
    run_id: str, root: Path, provider: str, *, agent_env: dict[str, str], **changes: Any
) -> tuple[RunSpec, Path]:
    """The counting agent on `provider`, cloning a fresh origin; the spec and its ledger."""
    files = make_origin(root / run_id)
    fields: dict[str, Any] = {
        "run_id": run_id,
        **origin_fields(files.origin, provider),
        "provider": provider,
        "agent_dir": str(COUNTING_AGENT),
        "command": "python3 /workspace/agent/main.py",
        "env": {"OVERNIGHT_LEDGER_URL": ledger_url(files.ledger), **agent_env},
        "poll_seconds": 1,
        "stall_seconds": 60,
        "sandbox_timeout_seconds": 60,
        **changes,
    }
    fields["host_ports"] = host_ports_for(fields["env"]["OVERNIGHT_LEDGER_URL"], provider)
    return RunSpec.model_validate(fields), files.ledger


def steps_done(ledger: Path) -> dict[int, int]:
    """Step number -> how many times the agent did it (each doing is one ledger entry)."""
    done: Counter[int] = Counter()
    for entry in ledger_entries(ledger):
        action = str(entry.get("action", ""))
        if action.startswith("step "):
            done[int(action.split()[1])] += 1
    return dict(sorted(done.items()))


@asynccontextmanager
async def worker_on(client: Client, queue: str) -> AsyncIterator[None]:
    """AgentRun and the sandbox activities polling `queue` for the block; stopped after it
    (activities cancelled, as a worker going away does)."""
    ready, stop = asyncio.Event(), asyncio.Event()
    worker = asyncio.create_task(
        serve(client, task_queue=queue, ready=ready, stop=stop, grants=granted())
    )
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({worker, waiter}, timeout=CAP, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if worker.done():
        worker.result()
    assert ready.is_set(), "the worker did not start polling"
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(worker, timeout=60)


def sandbox_state(engine: LocalEngine, sandbox_id: str) -> str | None:
    meta = engine.find(sandbox_id)
    return None if meta is None else meta.state


def checkpoint_step(engine: LocalEngine, sandbox_id: str) -> int | None:
    try:
        text = engine.host_path(sandbox_id, "/workspace/checkpoint.json").read_text()
        step = json.loads(text).get("step")
    except (OSError, ValueError):
        return None
    return step if isinstance(step, int) else None


def agent_frozen(run_id: str) -> bool:
    """Whether the run's agent processes exist and are all held: in a frozen cgroup (a local
    sandbox's own, see activities/providers/local/cgroups.py) or stopped (SIGSTOP: state T,
    sandboxes made before cgroups). The local launcher watching each agent from outside the
    sandbox is not one of them."""
    held = []
    for pid in agent_pids(run_id):
        try:
            if b"local/launcher.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            held.append(state in ("T", "t") or _in_frozen_cgroup(pid))
        except OSError:
            continue
    return bool(held) and all(held)


def _in_frozen_cgroup(pid: int) -> bool:
    """Whether `pid`'s cgroup is frozen (v2 `cgroup.events` or the v1 freezer's state)."""
    found = {}
    for mount in mounts():
        if mount.fs == "cgroup2" or "freezer" in mount.controllers:
            found["cgroup2" if mount.fs == "cgroup2" else "freezer"] = mount
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        number, names, path = line.split(":", 2)
        if number == "0" and "cgroup2" in found and path != "/":
            events = Path(found["cgroup2"].point, path.lstrip("/"), "cgroup.events")
            if events.exists() and "frozen 1" in events.read_text():
                return True
        if "freezer" in names.split(",") and "freezer" in found:
            state = Path(found["freezer"].point, path.lstrip("/"), "freezer.state")
            if state.exists() and state.read_text().strip() == "FROZEN":
                return True
    return False


async def until(condition: Callable[[], bool], what: str, timeout: float = CAP) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await asyncio.to_thread(condition):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what}: not in {timeout}s")
