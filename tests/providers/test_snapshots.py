"""Snapshot recovery on every provider: capture a paused sandbox, make a sandbox from the
snapshot, answer the agent's request, clean up (local: a copy of /workspace; runtime: the
strict fake's snapshot routes, reference section 6)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from temporalio.testing import ActivityEnvironment

from activities.models import (
    DeleteSnapshotsInput,
    ListSnapshotsInput,
    SnapshotRestore,
    TakeSnapshotInput,
)
from activities.providers.protocol import AgentLaunch, ProviderError
from activities.providers.snapshot_protocol import SnapshotProvider
from activities.sandbox.snapshots import SnapshotActivities, start_restored, usable_restore
from overnight.core.constants import LABEL_RUN, SNAPSHOT_ANSWER
from tests.providers.conftest import Harness
from tests.providers.test_behaviour import TICKER, new_sandbox, request, start
from tests.waits import CAP


def activities(h: Harness) -> SnapshotActivities:
    async def get(_name: str) -> object:
        return h.provider

    return SnapshotActivities(get)  # type: ignore[arg-type]


def take(h: Harness, sid: str, number: int, **kw: object) -> TakeSnapshotInput:
    return TakeSnapshotInput(
        provider="local" if h.name == "local" else "runtime",
        sandbox_id=sid,
        run_id="r",
        number=number,
        mode="disk",
        **kw,  # type: ignore[arg-type]
    )


async def test_a_running_sandbox_is_never_captured_directly(provider: Harness) -> None:
    h = provider
    assert isinstance(h.provider, SnapshotProvider)
    info = await new_sandbox(h)
    with pytest.raises(ProviderError):
        await h.provider.snapshot(
            info.sandbox_id, name="x", mode="disk", labels={LABEL_RUN: "r"}, retention_days=1
        )


async def test_capture_pauses_waits_for_ready_wakes_and_answers_the_agent(
    provider: Harness,
) -> None:
    h = provider
    info = await new_sandbox(h)
    sid = info.sandbox_id
    await h.provider.write_file(sid, "/workspace/app/warm.db", b"warm state")
    await start(h, sid, TICKER)
    ticks = h.host_path(sid, "/workspace/ticks")
    give_up = time.monotonic() + CAP
    while not ticks.exists() and time.monotonic() < give_up:
        time.sleep(0.05)
    env = ActivityEnvironment()
    taken = await env.run(activities(h).take_snapshot, take(h, sid, 1, request=3))
    assert taken.state == "ready" and taken.snapshot_id
    assert taken.pause_seconds >= 0
    assert (await h.provider.sandbox(sid)).state == "running"
    answer = json.loads(h.host_path(sid, SNAPSHOT_ANSWER).read_text())
    assert answer == {"request": 3, "state": "ready", "snapshot_id": taken.snapshot_id}
    # The agent runs on after the capture (a cap: on a loaded machine a tick can take seconds).
    size = ticks.stat().st_size
    give_up = time.monotonic() + CAP
    while ticks.stat().st_size <= size and time.monotonic() < give_up:
        await asyncio.sleep(0.05)
    assert ticks.stat().st_size > size


async def test_a_sandbox_made_from_a_snapshot_has_its_files_and_the_agent_starts(
    provider: Harness,
) -> None:
    h = provider
    info = await new_sandbox(h)
    sid = info.sandbox_id
    await h.provider.write_file(sid, "/workspace/app/warm.db", b"warm state")
    await h.provider.write_file(sid, "/workspace/checkpoint.json", b'{"step": 4}')
    env = ActivityEnvironment()
    taken = await env.run(activities(h).take_snapshot, take(h, sid, 1))
    assert taken.snapshot_id is not None
    # Written after the capture: not in the copy.
    await h.provider.write_file(sid, "/workspace/app/later", b"x")
    restore = SnapshotRestore(snapshot_id=taken.snapshot_id, mode="disk", request=2)
    made = await env.run(usable_restore, h.provider, request(), restore)
    assert made.snapshot_id == taken.snapshot_id
    copy, created = await h.provider.get_or_create(made)
    assert created and copy.state == "running" and copy.sandbox_id != sid
    # A retried create does not fill it again.
    again, created_again = await h.provider.get_or_create(made)
    assert again.sandbox_id == copy.sandbox_id and not created_again
    launch = AgentLaunch(start_key="r-2-0", command="sleep 30", cwd="/workspace")
    process, adopted = await start_restored(h.provider, copy, restore, launch)
    assert process.state == "running" and not adopted
    cid = copy.sandbox_id
    assert h.host_path(cid, "/workspace/app/warm.db").read_bytes() == b"warm state"
    assert h.host_path(cid, "/workspace/checkpoint.json").read_bytes() == b'{"step": 4}'
    assert not h.host_path(cid, "/workspace/app/later").exists()
    answer = json.loads(h.host_path(cid, SNAPSHOT_ANSWER).read_text())
    assert answer["request"] == 2 and answer["state"] == "ready"


async def test_a_deleted_snapshot_falls_back_to_the_checkpoint_and_older_ones_go(
    provider: Harness,
) -> None:
    h = provider
    sid = (await new_sandbox(h)).sandbox_id
    env = ActivityEnvironment()
    acts = activities(h)
    first = await env.run(acts.take_snapshot, take(h, sid, 1))
    second = await env.run(acts.take_snapshot, take(h, sid, 2))
    assert first.snapshot_id and second.snapshot_id
    third = await env.run(acts.take_snapshot, take(h, sid, 3, delete_ids=[first.snapshot_id]))
    assert third.deleted == [first.snapshot_id]
    kind = take(h, sid, 1).provider
    listed = await env.run(acts.list_snapshots, ListSnapshotsInput(provider=kind, run_id="r"))
    assert {s.snapshot_id for s in listed.snapshots} == {second.snapshot_id, third.snapshot_id}
    assert (await h.provider.snapshot_info(first.snapshot_id)).state == "missing"  # type: ignore[attr-defined]
    restore = SnapshotRestore(snapshot_id=first.snapshot_id)
    unchanged = await env.run(usable_restore, h.provider, request(), restore)
    assert unchanged.snapshot_id is None
    gone = [second.snapshot_id, third.snapshot_id]
    await env.run(acts.delete_snapshots, DeleteSnapshotsInput(provider=kind, snapshot_ids=gone))
    listed = await env.run(acts.list_snapshots, ListSnapshotsInput(provider=kind, run_id="r"))
    assert listed.snapshots == []


async def test_memory_mode_adopts_the_agent_captured_running(provider: Harness) -> None:
    """Runtime only (local offers disk only). On the fake, memory mode is simulated (the
    agent is started again, same id and command): this proves adoption by start key, not that
    memory survives."""
    h = provider
    if h.name == "local":
        with pytest.raises(ProviderError):
            await h.provider.snapshot(  # type: ignore[attr-defined]
                "x", name="x", mode="memory", labels={}, retention_days=1
            )
        return
    sid = (await new_sandbox(h)).sandbox_id
    agent = await start(h, sid, TICKER, key="r-1-0")
    env = ActivityEnvironment()
    acts = activities(h)
    taken = await env.run(acts.take_snapshot, take(h, sid, 1).model_copy(update={"mode": "memory"}))
    assert taken.state == "ready" and taken.snapshot_id
    restore = SnapshotRestore(snapshot_id=taken.snapshot_id, mode="memory", adopt_start_key="r-1-0")
    made = await env.run(usable_restore, h.provider, request(), restore)
    copy, _ = await h.provider.get_or_create(made)
    launch = AgentLaunch(start_key="r-2-0", command="sleep 30", cwd="/workspace")
    process, adopted = await start_restored(h.provider, copy, restore, launch)
    assert adopted and process.state == "running"
    assert process.process_id != agent.process_id or copy.sandbox_id != sid


async def test_memory_mode_reports_a_fresh_start_when_the_captured_agent_did_not_come_back(
    provider: Harness,
) -> None:
    """The snapshot held no running agent under the key to adopt: the restore starts the
    agent on the new launch's key and says so (`adopted` False), instead of starting it under
    the old key and calling that an adoption."""
    h = provider
    if h.name == "local":
        return  # memory mode is Runtime's
    sid = (await new_sandbox(h)).sandbox_id
    env = ActivityEnvironment()
    acts = activities(h)
    taken = await env.run(acts.take_snapshot, take(h, sid, 1).model_copy(update={"mode": "memory"}))
    assert taken.state == "ready" and taken.snapshot_id
    restore = SnapshotRestore(snapshot_id=taken.snapshot_id, mode="memory", adopt_start_key="r-1-0")
    made = await env.run(usable_restore, h.provider, request(), restore)
    copy, _ = await h.provider.get_or_create(made)
    launch = AgentLaunch(start_key="r-2-0", command="sleep 30", cwd="/workspace")
    process, adopted = await start_restored(h.provider, copy, restore, launch)
    assert not adopted and process.state == "running"
    assert await h.provider.find_agent(copy.sandbox_id, "r-1-0") is None  # type: ignore[attr-defined]
    started = await h.provider.find_agent(copy.sandbox_id, "r-2-0")  # type: ignore[attr-defined]
    assert started is not None and started.process_id == process.process_id


async def test_the_fake_refuses_image_with_snapshot_and_keeps_the_snapshots_labels(
    provider: Harness,
) -> None:
    h = provider
    if h.name == "local":
        return
    import withruntime

    sid = (await new_sandbox(h)).sandbox_id
    env = ActivityEnvironment()
    taken = await env.run(activities(h).take_snapshot, take(h, sid, 1))
    client = h.provider._client()  # type: ignore[attr-defined]
    with pytest.raises(withruntime.InvalidRequestError):
        await client.sandboxes.create(snapshot=taken.snapshot_id, image="base", wait=False)
    made = await client.sandboxes.create(snapshot=taken.snapshot_id, wait=False)
    assert made.info["labels"][LABEL_RUN] == "r"
    named = await client.sandboxes.create(
        snapshot=taken.snapshot_id, labels={"other": "x"}, wait=False
    )
    assert named.info["labels"] == {"other": "x"}
    await client.snapshots.delete(taken.snapshot_id)
    with pytest.raises(withruntime.NotFoundError):
        await client.snapshots.get(taken.snapshot_id)
    for made_id in (made.id, named.id):
        await h.provider.stop(made_id)


async def test_a_retried_capture_finds_its_snapshot_and_leaves_the_sandbox_running(
    provider: Harness,
) -> None:
    """A first try paused the sandbox and captured it, then failed before the wake: the retry
    finds the sandbox paused, the snapshot already there (by its name), and wakes it."""
    h = provider
    sid = (await new_sandbox(h)).sandbox_id
    env = ActivityEnvironment()
    first = await env.run(activities(h).take_snapshot, take(h, sid, 1))
    await h.provider.pause(sid)
    again = await env.run(activities(h).take_snapshot, take(h, sid, 1, request=1))
    assert again.state == "ready" and again.snapshot_id == first.snapshot_id
    assert (await h.provider.sandbox(sid)).state == "running"
    answer = json.loads(h.host_path(sid, SNAPSHOT_ANSWER).read_text())
    assert answer["request"] == 1 and answer["snapshot_id"] == first.snapshot_id
