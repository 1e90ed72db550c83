"""Snapshot recovery on the real stack: the session's dev server, a worker in this process,
real agent processes, on the local provider and on the runtime provider through the real SDK
against the strict fake Runtime API (disk mode on both: the fake's memory mode is a
simulation, see fakes/runtime/snapshots.py).

The warm agent (tests/agents/warm) builds warm state (a SQLite database and a helper process),
asks for a snapshot, and crashes later: restarted from the snapshot it finds its database and
does not build it again (restarted from the checkpoint it must: `bench.snapshot_recovery`
measures both).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from activities.providers.local.engine import LocalEngine
from activities.providers.local.snapshots import LocalSnapshots
from fakes.git_http import origin_fields
from fakes.runtime import FakeRuntime
from overnight.cli import client as api
from overnight.core.constants import LABEL_RUN
from overnight.core.home import overnight_home
from overnight.core.models import RunSpec
from overnight.demo.sample_demo import make_origin
from tests.e2e.counting import worker_on
from tests.live import new_run_id, nothing_left_running

WARM_AGENT = Path(__file__).resolve().parent.parent / "agents" / "warm"


def warm_spec(run_id: str, root: Path, provider: str, **changes: Any) -> RunSpec:
    files = make_origin(root / run_id)
    fields: dict[str, Any] = {
        "run_id": run_id,
        **origin_fields(files.origin, provider),
        "provider": provider,
        "agent_dir": str(WARM_AGENT),
        "command": "python3 /workspace/agent/main.py",
        "env": {"AGENT_WARM_SECONDS": "2", "AGENT_STEPS": "6", "AGENT_CRASH_AT": "4"},
        "poll_seconds": 1,
        "stall_seconds": 60,
        "sandbox_timeout_seconds": 120,
        "snapshot_every_seconds": 1,
        **changes,
    }
    return RunSpec.model_validate(fields)


@pytest.mark.parametrize("provider", ["local", "runtime"])
async def test_a_crashed_agent_comes_back_from_its_snapshot_with_its_warm_state(
    dev_client: Client, tmp_path: Path, provider: str
) -> None:
    client = dev_client
    runtime_home = tmp_path / "runtime-home"
    queue = f"snap-{uuid.uuid4().hex[:8]}"
    run_id = new_run_id(f"snap-{provider}")
    spec = warm_spec(run_id, tmp_path, provider, recovery="snapshot", snapshot_mode="disk")
    with pytest.MonkeyPatch.context() as env:
        async with (
            FakeRuntime.local(runtime_home) as fake,
            nothing_left_running(client, [None, runtime_home]) as runs,
        ):
            fake.use(env, tmp_path / "config")
            async with worker_on(client, queue):
                runs.append(run_id)
                await api.start_run(client, spec, task_queue=queue)
                result = await asyncio.wait_for(api.wait_result(client, run_id), timeout=90)
                status = await api.get_status(client, run_id)
            assert result.outcome == "finished" and result.restarts == 1
            final = json.loads(result.checkpoint or "{}")
            # Built once: the restart found the database in the sandbox made from the snapshot.
            assert final["builds"] == 1 and final["step"] == 6
            assert sorted(final["ready_at"]) == ["1", "2"]
            assert status.snapshots_taken >= 1 and status.restored_from is not None
            assert status.restarts[0].reason == "agent crashed (exit 3)"
            # The run's snapshots are gone with it (no keep_sandboxes).
            home = runtime_home if provider == "runtime" else overnight_home()
            assert LocalSnapshots(LocalEngine(home)).list({LABEL_RUN: run_id}) == []
