"""Lease ends on the real stack: the session's dev server, workers in this process, real agent
processes, and the runtime provider through the real SDK against the strict fake Runtime API.

- With no worker alive nobody extends a lease, so it ends: the sandbox pauses (agent frozen,
  files kept, nothing more spent) and, once a worker is back, the run goes on in the same
  sandbox with the same agent: zero steps redone, none missing (a dead man's switch).
- While the agent progresses, its sandbox's lease is extended ahead of its end: a run several
  leases long finishes in one sandbox with no restart (an extension that a loaded machine made
  too late only means the run wakes the same sandbox at that end).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.providers.local.engine import LocalEngine
from fakes.runtime import FakeRuntime
from overnight.cli import client as api
from overnight.core.constants import LABEL_RUN
from overnight.core.home import overnight_home
from overnight.core.models import RunResult, RunStatus
from tests.e2e.counting import (
    agent_frozen,
    checkpoint_step,
    counting_spec,
    sandbox_state,
    steps_done,
    until,
    worker_on,
)
from tests.e2e.helpers import wait_for_status
from tests.live import new_run_id, nothing_left_running

STEPS = 8
# The local lease: short, so it ends by itself soon after the worker goes (no worker extends
# it). Runtime's shortest is 60 s; there time passes through `fake.end_lease_in`.
LOCAL_LEASE_SECONDS = 5
# A local agent's step: long enough that, after step 2 is on disk, the worker's stop plus the
# rest of its last lease (up to LOCAL_LEASE_SECONDS) cannot outlast the agent's remaining steps
# on a loaded machine (at 1 s the agent sometimes finished before its sandbox paused).
LOCAL_STEP_SECONDS = 2


# How long the worker stays away after the sandbox paused: briefly, or past the window of the
# observe it left behind (a retried observe then has no time left to wait: it must still look).
BRIEF_ABSENCE = 0.0
LONG_ABSENCE = 12.0
LONG_ABSENCE_STALL_SECONDS = 10  # bounds the observe's window


@dataclass
class DeadMan:
    """What a run whose worker went away while its lease ended left behind."""

    sandbox_id: str
    result: RunResult
    status: RunStatus
    steps_done: dict[int, int]
    sandboxes: list[str]
    wakes: list[tuple[str, str]]  # runtime: each wake of a paused sandbox and its cause


async def lease_end_with_no_worker(
    client: Client, tmp_path: Path, provider: str, absence: float
) -> DeadMan:
    """A run of the counting agent whose only worker stops after step 2; the lease ends (no
    one extends it), the sandbox must pause with the agent frozen and its files kept; after
    `absence` more seconds a worker comes back and the run finishes."""
    runtime_home = tmp_path / "runtime-home"
    engine = LocalEngine(runtime_home if provider == "runtime" else overnight_home())
    run_id = new_run_id(f"deadman-{provider}")
    spec, ledger = counting_spec(
        run_id,
        tmp_path,
        provider,
        agent_env={
            "AGENT_STEPS": str(STEPS),
            "AGENT_STEP_SECONDS": str(LOCAL_STEP_SECONDS if provider == "local" else 1),
        },
        sandbox_timeout_seconds=LOCAL_LEASE_SECONDS if provider == "local" else 60,
        stall_seconds=LONG_ABSENCE_STALL_SECONDS if absence else 60,
    )
    queue = f"deadman-{uuid.uuid4().hex[:8]}"
    with pytest.MonkeyPatch.context() as env:
        async with (
            FakeRuntime.local(runtime_home) as fake,
            nothing_left_running(client, [None, runtime_home]) as runs,
        ):
            fake.use(env, tmp_path / "config")
            async with worker_on(client, queue):
                runs.append(run_id)
                await api.start_run(client, spec, task_queue=queue)
                seen = await wait_for_status(client, run_id, lambda s: s.sandbox_id is not None)
                sid = seen.sandbox_id
                assert sid is not None
                # Read on disk, not through the run's status, which lags by an observe.
                await until(lambda: (checkpoint_step(engine, sid) or 0) >= 2, "step 2")
            # No worker is alive from here on: nobody extends the lease.
            if provider == "runtime":
                fake.end_lease_in(sid, 1)  # the lease runs out (60 s is the shortest asked)
            await until(lambda: sandbox_state(engine, sid) == "paused", "pause at lease end")
            paused_at_step = checkpoint_step(engine, sid)
            await asyncio.sleep(2)
            # Paused, not ended: the agent is frozen where it was and its files are kept.
            assert sandbox_state(engine, sid) == "paused"
            assert agent_frozen(run_id), f"agent not frozen at step {paused_at_step} of {STEPS}"
            assert checkpoint_step(engine, sid) == paused_at_step
            assert paused_at_step is not None and paused_at_step < STEPS
            await asyncio.sleep(absence)
            async with worker_on(client, queue):
                result = await asyncio.wait_for(api.wait_result(client, run_id), timeout=60)
                status = await api.get_status(client, run_id)
            used = engine.list_sandboxes({LABEL_RUN: run_id}, include_stopped=True)
            wakes = fake.wakes
    return DeadMan(sid, result, status, steps_done(ledger), [m.id for m in used], wakes)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("provider", "absence"),
    [
        ("local", BRIEF_ABSENCE),
        ("runtime", BRIEF_ABSENCE),
        ("local", LONG_ABSENCE),
        ("runtime", LONG_ABSENCE),
    ],
    ids=["local-brief", "runtime-brief", "local-long", "runtime-long"],
)
@pytest.mark.long
async def test_a_lease_ending_while_no_worker_is_alive_costs_zero_steps(
    dev_client: Client, tmp_path: Path, provider: str, absence: float
) -> None:
    run = await lease_end_with_no_worker(dev_client, tmp_path, provider, absence)

    assert (run.result.attempts, run.result.restarts) == (1, 0), run.status.restarts
    assert run.steps_done == {n: 1 for n in range(1, STEPS + 1)}
    assert run.result.outcome == "finished"
    assert run.sandboxes == [run.sandbox_id]
    if absence == BRIEF_ABSENCE:
        the_run_itself_wakes_a_sandbox_paused_at_its_lease_end(run)


def the_run_itself_wakes_a_sandbox_paused_at_its_lease_end(run: DeadMan) -> None:
    """The run itself woke its sandbox paused at its lease end: checked on the runs of the
    brief absences above (the same scenario, so no run is made twice for it)."""
    # Woken by the run itself (a loaded machine may see the short fresh lease end once more
    # before the run's extension lands: woken again, the same way).
    assert run.status.lease_resumes >= 1
    assert [cause for _, cause in run.wakes if not cause.endswith(":wake")] == []


PROGRESS_LEASE_SECONDS = 4
PROGRESS_STEPS = 14  # a step a second: three and a half leases


async def lease_extensions_asked(client: Client, run_id: str) -> int:
    """How many times the run asked its provider to move the lease end (history)."""
    events = (await client.get_workflow_handle(run_id).fetch_history()).events
    return sum(
        1
        for e in events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == "extend_sandbox"
    )


@pytest.mark.timeout(300)
async def test_a_progressing_local_run_keeps_its_sandbox_across_its_lease_ends(
    dev_client: Client, tmp_path: Path
) -> None:
    engine = LocalEngine(overnight_home())
    run_id = new_run_id("keep")
    spec, ledger = counting_spec(
        run_id,
        tmp_path,
        "local",
        agent_env={"AGENT_STEPS": str(PROGRESS_STEPS), "AGENT_STEP_SECONDS": "1"},
        sandbox_timeout_seconds=PROGRESS_LEASE_SECONDS,
    )
    queue = f"keep-{uuid.uuid4().hex[:8]}"
    lease_ends: list[datetime] = []
    async with nothing_left_running(dev_client) as runs, worker_on(dev_client, queue):
        runs.append(run_id)
        started = time.monotonic()
        await api.start_run(dev_client, spec, task_queue=queue)
        waiting = asyncio.create_task(api.wait_result(dev_client, run_id))
        while not waiting.done() and time.monotonic() - started < 240:  # a cap, not a bound
            status = await api.get_status(dev_client, run_id)
            if status.lease_ends_at is not None and status.lease_ends_at not in lease_ends:
                lease_ends.append(status.lease_ends_at)
            await asyncio.sleep(0.25)
        result = await asyncio.wait_for(waiting, timeout=60)
        status = await api.get_status(dev_client, run_id)
        extensions = await lease_extensions_asked(dev_client, run_id)
        took = time.monotonic() - started
    used = engine.list_sandboxes({LABEL_RUN: run_id}, include_stopped=True)
    print(f"{took:.1f} s, {extensions} extensions asked, woken {status.lease_resumes}x at an end")

    assert result.outcome == "finished"
    # Kept: one sandbox, one attempt, no restart. The lease was moved ahead while the agent
    # progressed. Whether each extension beat its lease end (a 1 s margin here) is the
    # machine's speed: a loaded one saw an end met once; the run then woke the same sandbox,
    # its agent frozen meanwhile, so nothing was lost or redone (checked below).
    assert (result.attempts, result.restarts) == (1, 0), status
    assert extensions >= 2, status
    assert len(used) == 1
    assert steps_done(ledger) == {n: 1 for n in range(1, PROGRESS_STEPS + 1)}
    # The run outlived its first lease several times over, and the lease end moved with it.
    assert took > 3 * PROGRESS_LEASE_SECONDS
    assert len(lease_ends) >= 3, lease_ends
    assert (lease_ends[-1] - lease_ends[0]).total_seconds() > 2 * PROGRESS_LEASE_SECONDS
