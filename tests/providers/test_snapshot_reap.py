"""`overnight reap` deletes the snapshots of runs that no longer exist (or ended without
cleaning up) and spares those of a live run, on every provider."""

from __future__ import annotations

import uuid

from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities.models import TakeSnapshotInput
from overnight.cli import client as api
from overnight.cli.render import reaped_text
from tests.providers.conftest import Harness
from tests.providers.test_behaviour import new_sandbox
from tests.providers.test_snapshots import activities


async def test_reap_deletes_snapshots_of_runs_that_are_gone_and_spares_a_live_runs(
    provider: Harness, dev_client: Client
) -> None:
    # The session's dev server, not the shared time-skipping one: a run left waiting for a
    # worker there holds the test server's clock and hangs every later workflow test.
    h = provider
    client = dev_client
    ghost, alive = f"ghost-{uuid.uuid4().hex[:8]}", f"alive-{uuid.uuid4().hex[:8]}"
    # A run that is still going (no worker needed to be RUNNING).
    handle = await client.start_workflow(
        "AgentRun", "not read", id=alive, task_queue=f"nobody-{uuid.uuid4().hex}"
    )
    try:
        sid = (await new_sandbox(h)).sandbox_id
        kind = "local" if h.name == "local" else "runtime"
        env = ActivityEnvironment()
        taken = {}
        for run_id in (ghost, alive):
            snap = TakeSnapshotInput(provider=kind, sandbox_id=sid, run_id=run_id, number=1)
            taken[run_id] = (await env.run(activities(h).take_snapshot, snap)).snapshot_id
        reaped = await api.reap(client, {kind: h.provider})
        snapshots = [entry for entry in reaped if entry.kind == "snapshot"]
        assert [(e.sandbox_id, e.run_id, e.stopped) for e in snapshots] == [
            (taken[ghost], ghost, True)
        ]
        assert (await h.provider.snapshot_info(taken[ghost])).state == "missing"  # type: ignore[attr-defined]
        assert (await h.provider.snapshot_info(taken[alive])).state == "ready"  # type: ignore[attr-defined]
        assert f"{kind} snapshot {taken[ghost]} of {ghost}: deleted" in reaped_text(reaped)
    finally:
        await handle.terminate("test over")
