"""The done check end to end: the real dev server, a worker in this process, real sandboxes
(local; and Runtime's, through the strict fake Runtime API and the real SDK) and the scripted
agent, which reads what the kit's `done_check_failure()` tells it and fixes its work on a
later start (`AGENT_FIX_ON_START`).

The check is `test -f fixed.txt` in the agent's `cwd`, run against its work pushed to the origin
in a sandbox of its own: it fails until the agent wrote the file (committed or not).
Each start also writes a file it never commits: with `keep_workspace`, every checkpoint's
workspace is kept, before the failed check and after it, and a crash after it finds them all.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.providers.local.engine import LocalEngine
from activities.providers.registry import open_configured
from activities.providers.runtime import agent_watch
from overnight.cli import client as api
from overnight.cli.workspace import diff_text
from overnight.core.constants import LABEL_CHECK, LABEL_RUN
from overnight.core.models import Budget, RunSpec
from overnight.worker.reaping import reap
from tests.e2e.helpers import wait_for_status, wait_no_agent_processes
from tests.e2e.test_workspace_kept import refs_in, refs_in_order
from tests.live import new_run_id, provider_world, running_sandboxes, scripted_spec

CHECK = "test -f fixed.txt || { echo 'fixed.txt is missing'; exit 1; }"
SHOWN = "`test -f fixed.txt || { echo 'fixed.txt is missing'; exit 1; }`"


def done_spec(
    run_id: str, root: Path, *, fix_on_start: int, crash_on_start: int = 0, **changes: object
) -> RunSpec:
    return scripted_spec(
        run_id,
        root,
        "done-check",
        env={"AGENT_FIX_ON_START": str(fix_on_start), "AGENT_CRASH_ON_START": str(crash_on_start)},
        done_when=["echo checking", CHECK],
        **changes,
    )


async def finishes_after_one_failed_check(client: Client, queue: str, spec: RunSpec) -> None:
    began = time.monotonic()
    await api.start_run(client, spec, task_queue=queue)
    result = await asyncio.wait_for(api.wait_result(client, spec.run_id), timeout=120)
    took = time.monotonic() - began

    status = await api.get_status(client, spec.run_id)
    why = [record.reason for record in status.restarts]
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0), (took, why)
    assert result.done_checks_used == 1
    assert [(c.command, c.passed, c.round) for c in result.done_checks] == [
        ("echo checking", True, 2),
        (CHECK, True, 2),
    ]
    assert result.done_checks[0].tail == "checking"
    checkpoint = json.loads(result.checkpoint or "{}")
    # Started again in the same sandbox (attempt 1), its reason naming the failed check, and
    # the kit read the failure's file: the command and what it printed.
    assert checkpoint["starts"] == 2 and checkpoint["next"] == "done: fixed"
    assert checkpoint["notes"] == [
        "start 1: first start",
        f"start 2: done check failed: {SHOWN} (exit 1)",
    ]
    told = checkpoint["told"]
    assert f"command: {CHECK}" in told and "result: exit 1" in told
    assert "fixed.txt is missing" in told


@pytest.mark.timeout(180)
async def test_a_failed_check_starts_the_agent_again_until_it_passes_local(
    dev_client: Client, task_queue: str, runs: list[str], tmp_path: Path
) -> None:
    spec = done_spec(new_run_id("donecheck"), tmp_path, fix_on_start=2)
    runs.append(spec.run_id)
    await finishes_after_one_failed_check(dev_client, task_queue, spec)


@pytest.mark.timeout(240)
async def test_a_failed_check_starts_the_agent_again_until_it_passes_runtime(
    dev_client: Client, tmp_path: Path
) -> None:
    spec = done_spec(new_run_id("rtdone"), tmp_path, fix_on_start=2, provider="runtime")
    async with provider_world(dev_client, "runtime", tmp_path, "rtdone") as (queue, fake, runs):
        assert fake is not None
        runs.append(spec.run_id)
        await finishes_after_one_failed_check(dev_client, queue, spec)
        # One sandbox for the whole run: the agent was started again inside it. Each round's
        # checks ran in a sandbox of their own, at the work pushed then.
        assert fake.sandbox_named(f"{spec.run_id}-1") is not None
        assert fake.sandbox_named(f"{spec.run_id}-2") is None
        assert [fake.sandbox_named(f"{spec.run_id}-check-{n}") is not None for n in (1, 2)] == [
            True,
            True,
        ]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("before_the_watch", [False, True], ids=["watched", "before-the-watch"])
async def test_exits_reported_late_by_runtime_are_seen_without_a_stall(
    dev_client: Client, tmp_path: Path, before_the_watch: bool
) -> None:
    """Runtime reports a process ended a moment after its exit marker is written. Longer than
    the watch's asking after the marker (as once under load, two exits in one sandbox here),
    the exit was lost until the stall deadline: "agent stalled 1 min" and a restart. So was
    one whose marker was written before the watch began (its start answered late), which the
    watch never reports: its first look finds the marker."""
    lag = agent_watch.EXIT_REPORT_TRIES * agent_watch.EXIT_REPORT_PAUSE + 3
    spec = done_spec(new_run_id("rtlate"), tmp_path, fix_on_start=2, provider="runtime")
    async with provider_world(dev_client, "runtime", tmp_path, "rtlate") as (queue, fake, runs):
        assert fake is not None
        fake.rules.exit_report_lag_seconds = lag
        if before_the_watch:
            late_watch = fake.slow(3, 1, route=r"POST /v1/sandboxes/[^/]+/files/watches$")
        runs.append(spec.run_id)
        await finishes_after_one_failed_check(dev_client, queue, spec)
        if before_the_watch:
            assert late_watch.fired == 1


@pytest.mark.timeout(180)
async def test_three_failed_checks_need_attention_naming_the_check(
    dev_client: Client, task_queue: str, runs: list[str], tmp_path: Path
) -> None:
    spec = done_spec(new_run_id("donefail"), tmp_path, fix_on_start=0)
    runs.append(spec.run_id)
    await api.start_run(dev_client, spec, task_queue=task_queue)
    status = await wait_for_status(
        dev_client, spec.run_id, lambda s: s.state == "needs_attention", timeout=120
    )

    assert status.attention_reason == (
        f"done checks used up (3 failed rounds of 3 allowed): last, {SHOWN} (exit 1)"
    )
    assert (status.attempt, status.restarts_used, status.done_checks_used) == (1, 0, 3)
    failed = status.done_checks[-1]
    assert (failed.command, failed.passed, failed.tail) == (CHECK, False, "fixed.txt is missing")
    await api.cancel_run(dev_client, spec.run_id, reason="test over")
    result = await asyncio.wait_for(api.wait_result(dev_client, spec.run_id), timeout=60)
    assert result.outcome == "cancelled"


@pytest.mark.timeout(180)
async def test_a_hanging_check_is_ended_at_its_limit(
    dev_client: Client, task_queue: str, runs: list[str], tmp_path: Path
) -> None:
    spec = scripted_spec(
        new_run_id("donehang"),
        tmp_path,
        "done-check",
        done_when=["echo checking for ever; sleep 600"],
        done_check_timeout_seconds=3,
        budget=Budget(max_done_checks=1),
    )
    runs.append(spec.run_id)
    await api.start_run(dev_client, spec, task_queue=task_queue)
    status = await wait_for_status(
        dev_client, spec.run_id, lambda s: s.state == "needs_attention", timeout=120
    )

    assert status.attention_reason == (
        "done checks used up (1 failed round of 1 allowed): last, "
        "`echo checking for ever; sleep 600` (timed out after 3 s and was ended)"
    )
    [hung] = status.done_checks
    assert hung.timed_out and not hung.passed and hung.tail == "checking for ever"
    assert 3 <= hung.seconds < 12, hung.seconds
    await api.cancel_run(dev_client, spec.run_id, reason="test over")
    result = await asyncio.wait_for(api.wait_result(dev_client, spec.run_id), timeout=60)
    assert result.outcome == "cancelled"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("crash_on_start", [0, 2], ids=["same-sandbox", "crash-after-the-check"])
async def test_the_workspace_kept_holds_the_uncommitted_work_around_a_failed_check(
    dev_client: Client, task_queue: str, runs: list[str], tmp_path: Path, crash_on_start: int
) -> None:
    # Each start writes work-<n>.txt and never commits it; the check fails after start 1. The
    # agent is started again in its sandbox; with `crash_on_start` 2 that start crashes, and
    # start 3, in a fresh sandbox from the workspace kept at checkpoint 2, fixes its work.
    crashed = crash_on_start > 0
    starts = 3 if crashed else 2
    spec = done_spec(
        new_run_id("donekeep"),
        tmp_path,
        fix_on_start=starts,
        crash_on_start=crash_on_start,
        keep_workspace=True,
    )
    runs.append(spec.run_id)
    await api.start_run(dev_client, spec, task_queue=task_queue)
    result = await asyncio.wait_for(api.wait_result(dev_client, spec.run_id), timeout=120)

    status = await api.get_status(dev_client, spec.run_id)
    why = [record.reason for record in status.restarts]
    assert (result.outcome, result.attempts, result.restarts) == (
        "finished",
        1 + crashed,
        int(crashed),
    ), why
    assert result.done_checks_used == 1
    checkpoint = json.loads(result.checkpoint or "{}")
    # Every start found what the starts before it wrote: in the same sandbox after the failed
    # check, and in the crash's fresh sandbox, put back from the workspace kept.
    assert checkpoint["starts"] == starts and checkpoint["next"] == "done: fixed"
    numbers = range(1, starts + 1)
    assert checkpoint["found"] == {str(n): [f"work-{k}.txt" for k in range(1, n)] for n in numbers}
    # One workspace kept a checkpoint, each start's, each in the origin as a ref.
    view = status.workspace
    assert view is not None and view.base is not None and view.problem is None, view
    assert [(k.number, k.outcome) for k in view.kept] == [(n, "pushed") for n in numbers]
    assert [k.attempt for k in view.kept] == [1, 1, 2][:starts]
    kept = [ref for ref in refs_in(Path(spec.repo), spec.run_id) if "/check-" not in ref]
    assert sorted(kept) == refs_in_order(spec.run_id, starts)
    # `overnight diff --step N`: checkpoint 1 was taken before the failed check, 2 after it.
    before = diff_text(spec.repo, view.kept[0], view.base, stat=True)
    assert "work-1.txt" in before and "work-2.txt" not in before and "fixed.txt" not in before
    after_failure = diff_text(spec.repo, view.kept[1], view.base, stat=True)
    assert "work-1.txt" in after_failure and "work-2.txt" in after_failure
    assert ("fixed.txt" in after_failure) is not crashed
    last = diff_text(spec.repo, view.kept[-1], view.base, stat=True)
    assert all(f"work-{n}.txt" in last for n in numbers) and "fixed.txt" in last
    # Nothing left running: the crashed attempt's sandbox is paused for a look, no agent lives.
    assert await wait_no_agent_processes(spec.run_id) == []
    left = running_sandboxes(spec.run_id)
    assert left == ([f"{spec.run_id}-1 (paused)"] if crashed else []), left


@pytest.mark.timeout(180)
async def test_a_check_sandbox_left_by_a_terminated_run_is_stopped_by_reap(
    dev_client: Client, task_queue: str, runs: list[str], tmp_path: Path
) -> None:
    # A terminated workflow cleans up nothing: its check sandbox, labelled with the run, is
    # reap's (as every sandbox of a closed run left running is).
    spec = scripted_spec(
        new_run_id("donereap"), tmp_path, "done-check", done_when=["echo checking; sleep 600"]
    )
    runs.append(spec.run_id)
    await api.start_run(dev_client, spec, task_queue=task_queue)
    check = f"{spec.run_id}-check-1"
    engine = LocalEngine()
    deadline = time.monotonic() + 120
    while (found := engine.find(check)) is None or found.state != "running":
        assert time.monotonic() < deadline, f"{check} never ran"
        await asyncio.sleep(0.2)
    assert (found.labels[LABEL_RUN], found.labels[LABEL_CHECK]) == (spec.run_id, "1")
    await dev_client.get_workflow_handle(spec.run_id).terminate(reason="test: no cleanup")

    async with open_configured() as providers:
        reaped = await reap(dev_client, providers)

    ours = {entry.sandbox_id: entry for entry in reaped if entry.run_id == spec.run_id}
    assert ours[check].stopped and ours[check].why == "its run is closed and nobody supervises it"
    assert running_sandboxes(spec.run_id) == []
