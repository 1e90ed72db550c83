"""What runs leave on disk, end to end on the real dev server with real local sandboxes: a
stopped sandbox is gone, a failed attempt's is kept paused for `keep_failed_days` and then
reaped, `overnight logs` says plainly which is which, and a worker SIGKILLed in the middle of a
delete leaves nothing the next `overnight reap` cannot finish."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.registry import open_configured
from overnight.cli import client as api
from overnight.core.constants import LABEL_KEEP_UNTIL, LABEL_RUN
from overnight.core.grants import WRITABLE_BIND_ROOTS_ENV
from overnight.core.home import overnight_home
from overnight.core.models import RunSpec
from overnight.core.retention import label_value, parse_label
from overnight.worker.devserver import DevServer
from overnight.worker.reaping import reap
from tests.conftest import REPO_ROOT, scratch_root
from tests.e2e.helpers import wait_for_status
from tests.e2e.test_operator import overnight_cli
from tests.full_forms import sized
from tests.live import new_run_id, scripted_spec
from tests.waits import CAP

# Runs started together, all crashing once: 10 in the suite, 20 in the full form
# (OVERNIGHT_FULL_TESTS=1, tests/full_forms.py), in about the same shares.
RUNS = sized(10, 20)
OPEN_RUNS = sized(2, 3)  # crash, then hold in their second attempt
NO_RETENTION = sized(2, 3)  # crash, then finish with keep_failed_days 0
TOMBSTONE_BYTES = 100_000


def crashing_spec(
    run_id: str, root: Path, env: dict[str, str] | None = None, **changes: Any
) -> RunSpec:
    """The scripted agent's `loud-crash`: attempt 1 prints and crashes (exit 3), attempt 2
    finishes (or holds, with AGENT_LATER_HOLD); tiny, and quick to notice."""
    return scripted_spec(
        run_id, root, "loud-crash", env={"AGENT_HOLD": "0.2", **(env or {})}, **changes
    )


def holding_files(run_ids: set[str]) -> set[str]:
    """The sandboxes of these runs whose folder still holds files (not only a tombstone),
    found on disk, not through any provider."""
    found = set()
    for folder in (overnight_home() / "sandboxes").iterdir():
        state = folder / "sandbox.json"
        if (
            not state.exists()
            or json.loads(state.read_text())["labels"].get(LABEL_RUN) not in run_ids
        ):
            continue
        size = sum(
            p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()
        )
        if (folder / "workspace").exists():
            found.add(folder.name)
        else:
            assert size < TOMBSTONE_BYTES, f"{folder.name} is stopped but holds {size} bytes"
    return found


@pytest.mark.timeout(240)
@pytest.mark.long
@pytest.mark.heavy
async def test_runs_with_crashes_leave_on_disk_only_open_runs_and_retained_sandboxes(
    dev_server: DevServer, dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    began = time.monotonic()
    ids = [new_run_id(f"ret{n:02d}") for n in range(RUNS)]
    runs.extend(ids)
    still_open, no_retention = ids[:OPEN_RUNS], ids[OPEN_RUNS : OPEN_RUNS + NO_RETENTION]
    retained = ids[OPEN_RUNS + NO_RETENTION :]
    # The open runs' second attempts hold quietly: no stall or lease end may restart them (a
    # third attempt, a third sandbox) however long a loaded machine takes to get to the end.
    specs = [
        crashing_spec(
            r,
            tmp_path,
            env={"AGENT_LATER_HOLD": "1800"},
            stall_seconds=1800,
            sandbox_timeout_seconds=1800,
        )
        for r in still_open
    ]
    specs += [crashing_spec(r, tmp_path, keep_failed_days=0) for r in no_retention]
    specs += [crashing_spec(r, tmp_path) for r in retained]
    await asyncio.gather(*(api.start_run(dev_client, s, task_queue=task_queue) for s in specs))
    results = await asyncio.wait_for(
        asyncio.gather(*(api.wait_result(dev_client, r) for r in no_retention + retained)),
        timeout=150,
    )
    for run_id in still_open:
        await wait_for_status(dev_client, run_id, lambda s: s.attempt == 2 and bool(s.process_id))
    settled = time.monotonic() - began
    assert {(r.outcome, r.attempts) for r in results} == {("finished", 2)}

    # On disk: the open runs' sandboxes (the crashed one set aside, the one running) and the
    # crashed ones inside their retention; every other is a tombstone of a few KiB.
    expected = {f"{r}-{n}" for r in still_open for n in (1, 2)} | {f"{r}-1" for r in retained}
    assert holding_files(set(ids)) == expected
    engine = LocalEngine(overnight_home())
    now = datetime.now(UTC)
    for run_id in retained:
        until = parse_label(engine.get(f"{run_id}-1").labels.get(LABEL_KEEP_UNTIL))
        assert until is not None and timedelta(days=3) - timedelta(minutes=5) < until - now
        assert until - now <= timedelta(days=3)

    # `overnight reap` now: nothing of theirs is past retention or without an open run.
    reaped_now = await overnight_cli(dev_server, "reap", "--json")
    assert reaped_now.returncode == 0, reaped_now.stderr
    assert [e for e in json.loads(reaped_now.stdout) if e["run_id"] in ids] == []
    shown = await overnight_cli(dev_server, "disk")
    assert shown.returncode == 0, shown.stderr
    assert re.search(
        rf"\n  {retained[0]}-1 +paused +[\d.]+ [KM]iB  run {retained[0]}, ", shown.stdout
    )
    assert "kept for a look until" in shown.stdout and "half deleted" not in shown.stdout

    # Three days and a minute later: the retained ones go; the open runs' stay.
    async with open_configured() as providers:
        later = await reap(dev_client, providers, now=now + timedelta(days=3, minutes=1))
    ours = [e for e in later if e.run_id in ids]
    assert sorted(e.sandbox_id for e in ours) == sorted(f"{r}-1" for r in retained)
    assert all(e.stopped and (e.freed_bytes or 0) > 0 for e in ours)
    assert all(e.why.startswith("its retention ended") for e in ours)
    assert holding_files(set(ids)) == {f"{r}-{n}" for r in still_open for n in (1, 2)}

    # The open runs end (cancelled): their crashed attempts are kept in turn, then reaped.
    for run_id in still_open:
        await api.cancel_run(dev_client, run_id, "test over")
    for run_id in still_open:
        await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=60)
    assert holding_files(set(ids)) == {f"{r}-1" for r in still_open}
    async with open_configured() as providers:
        await reap(dev_client, providers, now=now + timedelta(days=4))
    assert holding_files(set(ids)) == set()
    print(f"\n{RUNS} runs with a crash each settled in {settled:.1f} s")


# A run and seven CLI calls, each a Python start (10+ s on a loaded machine): the default cap.
@pytest.mark.timeout(300)
async def test_logs_of_a_finished_runs_crashed_attempt_work_within_retention_and_say_why_not_after(
    dev_server: DevServer, dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    run_id = new_run_id("retlogs")
    runs.append(run_id)
    await api.start_run(dev_client, crashing_spec(run_id, tmp_path), task_queue=task_queue)
    result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=CAP)
    assert (result.outcome, result.attempts) == ("finished", 2)

    # Two reads that change nothing, so at once (each CLI call is a Python start).
    within, finished = await asyncio.gather(
        overnight_cli(dev_server, "logs", run_id, "--attempt", "1"),
        overnight_cli(dev_server, "logs", run_id, "--attempt", "2"),
    )
    # Within retention: the crashed attempt's whole output, read where it is kept paused.
    assert within.returncode == 0, within.stderr
    assert within.stdout.splitlines()[0] == "working: line 1 of the first attempt"
    assert "RuntimeError: the API refused token" in within.stdout
    # The finished attempt's sandbox is already gone: said so, with its kept last words.
    assert finished.returncode == 0, finished.stderr
    assert f"sandbox {run_id}-2 (attempt 2) was deleted on " in finished.stderr
    assert "when it stopped (a stopped sandbox keeps nothing, as on Runtime)" in finished.stderr
    assert finished.stdout.strip().endswith("all done")

    # Its retention ends (its label moved to the past) and `overnight reap` deletes it.
    provider = LocalProvider()
    ended = datetime.now(UTC) - timedelta(minutes=1)
    await provider.set_labels(f"{run_id}-1", {LABEL_KEEP_UNTIL: label_value(ended)})
    reaped = await overnight_cli(dev_server, "reap")
    assert reaped.returncode == 0, reaped.stderr
    assert f"local sandbox {run_id}-1 of {run_id}: deleted: its retention ended" in reaped.stdout

    after, inspected = await asyncio.gather(
        overnight_cli(dev_server, "logs", run_id, "--attempt", "1"),
        overnight_cli(dev_server, "inspect", run_id, "--attempt", "1"),
    )
    assert after.returncode == 0, after.stderr
    day = f"{datetime.now(UTC):%Y-%m-%d}"
    assert (
        f"sandbox {run_id}-1 (attempt 1) was deleted on {day}" in after.stderr
        and f"at the end of its retention (it was kept for a look until {ended:%Y-%m-%d %H:%M} UTC)"
        in after.stderr
    ), after.stderr
    kept = f"its last words, as the run kept them (attempt 1; also in overnight status {run_id})"
    assert kept in after.stderr
    assert after.stdout.splitlines()[-1].startswith("RuntimeError: the API refused token")
    assert "has no sandbox" not in after.stderr
    assert inspected.returncode == 1 and "at the end of its retention" in inspected.stderr

    # A month on, reap forgets its record too: the run still says what it kept.
    async with open_configured() as providers:
        await reap(dev_client, providers, now=datetime.now(UTC) + timedelta(days=31))
    assert LocalEngine(overnight_home()).find(f"{run_id}-1") is None
    forgotten = await overnight_cli(dev_server, "logs", run_id, "--attempt", "1", "--tail", "1")
    assert forgotten.returncode == 0, forgotten.stderr
    assert f"the sandbox of run {run_id}'s attempt 1 is gone: deleted, and its record too" in (
        forgotten.stderr
    )
    assert forgotten.stdout.startswith("RuntimeError: the API refused token")


# A worker whose deletes hang half way, so the test can SIGKILL it right there: the first part
# of the trash entry is deleted for real, then it says where it is and waits to be killed.
_HANGING_WORKER = textwrap.dedent(
    """
    import os, sys, time
    from activities.providers.local import disk
    real = disk.remove_tree
    def half_then_hang(path):
        if path.parent.name == disk.TRASH:
            real(sorted(path.iterdir())[0])
            # Written whole, then renamed: the test kills this worker once the mark exists.
            with open(os.environ["DELETE_MARK"] + ".tmp", "w") as mark:
                mark.write(str(path))
            os.rename(os.environ["DELETE_MARK"] + ".tmp", os.environ["DELETE_MARK"])
            time.sleep(3600)
        real(path)
    disk.remove_tree = half_then_hang
    sys.argv = ["worker.py", "--task-queue", os.environ["QUEUE"]]
    import runpy
    runpy.run_path("worker.py", run_name="__main__")
    """
)


@pytest.mark.timeout(120)
async def test_a_worker_killed_in_the_middle_of_a_delete_leaves_a_folder_the_next_reap_removes(
    dev_server: DevServer, dev_client: Client, tmp_path: Path, runs: list[str]
) -> None:
    queue, mark = new_run_id("killed"), tmp_path / "deleting"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "RUNTIME_"))} | {
        "TEMPORAL_ADDRESS": dev_server.address,
        "TEMPORAL_NAMESPACE": dev_server.namespace,
        WRITABLE_BIND_ROOTS_ENV: str(scratch_root()),
        "QUEUE": queue,
        "DELETE_MARK": str(mark),
        "PYTHONUNBUFFERED": "1",
    }
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [sys.executable, "-c", _HANGING_WORKER],
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        run_id = new_run_id("killdel")
        runs.append(run_id)
        spec = scripted_spec(run_id, tmp_path, "last-words", env={"AGENT_HOLD": "0.2"})
        await api.start_run(dev_client, spec, task_queue=queue)
        give_up = time.monotonic() + 60
        while not mark.exists() and time.monotonic() < give_up and worker.poll() is None:
            await asyncio.sleep(0.05)
        assert mark.exists(), (tmp_path / "worker.log").read_text()[-3000:]
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=CAP)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
        log.close()

    # Killed in the middle: the sandbox is a tombstone already, the rest half deleted in the
    # trash, where nothing holds its lock any more.
    left = Path(mark.read_text())
    sandbox = LocalEngine(overnight_home()).folder(f"{run_id}-1")
    assert not (sandbox / "workspace").exists()
    assert left.is_dir() and (left / "workspace" / "app" / ".git").is_dir()

    reaped = await overnight_cli(dev_server, "reap", "--json")

    assert reaped.returncode == 0, reaped.stderr
    [entry] = [e for e in json.loads(reaped.stdout) if e["sandbox_id"] == left.name]
    assert (entry["kind"], entry["stopped"]) == ("trash", True)
    assert entry["freed_bytes"] > 0
    assert not left.exists()
    text = await overnight_cli(dev_server, "reap")
    assert left.name not in text.stdout  # nothing left to finish
