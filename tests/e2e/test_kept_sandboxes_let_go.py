"""Nothing of a kept sandbox runs on the host (issue 51), end to end: the real dev server, an
in-process worker, real bubblewrap sandboxes on images of their own (loop mounts, where the
machine allows them), the real `overnight` command.

Before, with `overnight dev` stopped, four kept sandboxes still had a host `launcher.py` (about
12 MB each), `slirp4netns` and `bwrap` alive and nine loop mounts, and `overnight reap` refused
to run without a server. Now a run's kept sandboxes (a stalled attempt's, whose agent was
frozen, and a crashed one's) hold no process and no mount once the run has ended, a sandbox
paused with its agent gone holds no mount while its run waits, their files are still read
(`inspect`) and a waiting run still goes on; `overnight reap` and `overnight disk` work with no
server for what this host holds. What each sandbox holds is found from /proc and /sys
(tests/sandbox_host_probe.py), and printed before and after.
"""

from __future__ import annotations

import asyncio
import json
import socket
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.providers.local import disk_image
from activities.providers.local.disk_limit import DISK_ENV
from activities.providers.local.engine import LocalEngine
from overnight.cli import client as api
from overnight.core.constants import LABEL_KEEP_UNTIL, LABEL_RUN
from overnight.core.home import overnight_home
from overnight.core.models import BudgetExtension
from overnight.core.retention import label_value
from overnight.worker.devserver import DevServer
from tests.e2e.helpers import wait_for_status
from tests.e2e.test_operator import overnight_cli
from tests.live import new_run_id, scripted_spec
from tests.sandbox_host_probe import held, wait_nothing_held
from tests.waits import CAP

IMAGES = disk_image.unavailable(Path("/tmp")) is None

# Attempt 1 stalls (a checkpoint, then silence, with a helper of its own: its sandbox is set
# aside with the agent alive, frozen), attempt 2 crashes, attempt 3 works a few seconds and
# finishes. Each leaves a file in the clone.
STALL_CRASH_FINISH = textwrap.dedent(
    """
    import json, os, subprocess, sys, time

    attempt = int(os.environ["OVERNIGHT_ATTEMPT"])
    path = os.environ["OVERNIGHT_CHECKPOINT"]

    def checkpoint(note):
        with open(path + ".tmp", "w") as out:
            json.dump({"next": note, "notes": [note]}, out)
        os.replace(path + ".tmp", path)

    with open(f"attempt-{attempt}.txt", "w") as out:
        out.write(f"attempt {attempt} was here\\n")
    checkpoint(f"attempt {attempt} began")
    if attempt == 1:
        subprocess.Popen(["sleep", "3600"])
        time.sleep(3600)
    if attempt == 2:
        print("attempt 2 crashes", flush=True)
        sys.exit(3)
    for n in range(6):
        checkpoint(f"attempt {attempt} step {n}")
        time.sleep(1)
    """
)


@pytest.fixture
def images(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process worker's sandboxes get images of their own where the machine allows
    (the tests' default is measured disks, which mount nothing)."""
    if IMAGES:
        monkeypatch.setenv(DISK_ENV, "image")


def _no_server() -> str:
    """An address where no Temporal server listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


async def _cli_without_server(dev_server: DevServer, *args: str) -> tuple[int, str, str]:
    done = await overnight_cli(dev_server, "--address", _no_server(), *args)
    return done.returncode, done.stdout, done.stderr


def _engine() -> LocalEngine:
    return LocalEngine(overnight_home())


@pytest.mark.timeout(300)
async def test_a_runs_kept_sandboxes_hold_nothing_on_the_host_once_it_ends_and_still_read(
    dev_server: DevServer,
    dev_client: Client,
    task_queue: str,
    tmp_path: Path,
    runs: list[str],
    images: None,
) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "main.py").write_text(STALL_CRASH_FINISH)
    run_id = new_run_id("letgo")
    runs.append(run_id)
    spec = scripted_spec(run_id, tmp_path, "custom", agent_dir=str(agent), stall_seconds=6)
    await api.start_run(dev_client, spec, task_queue=task_queue)

    # While the run goes on in attempt 3, the stalled attempt's sandbox is paused with its
    # agent frozen in it: its run moved on, but the run is open.
    await wait_for_status(dev_client, run_id, lambda s: s.attempt == 3, timeout=150)
    engine = _engine()
    stalled, crashed = engine.folder(f"{run_id}-1"), engine.folder(f"{run_id}-2")
    during = {"stalled": held(stalled), "crashed": held(crashed)}

    result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=150)
    assert (result.outcome, result.attempts) == ("finished", 3)
    for name in (f"{run_id}-1", f"{run_id}-2"):
        meta = engine.get(name)
        assert meta.state == "paused" and meta.labels.get(LABEL_KEEP_UNTIL), meta

    after = {
        "stalled": await wait_nothing_held(stalled),
        "crashed": await wait_nothing_held(crashed),
    }
    for which in ("stalled", "crashed"):
        print(f"\n{which} attempt's kept sandbox: during the run {during[which].words()}")
        print(f"{which} attempt's kept sandbox: after the run {after[which].words()}")
    assert after["stalled"].nothing, after["stalled"]
    assert after["crashed"].nothing, after["crashed"]
    [agent_id] = [p.name for p in (stalled / "processes").iterdir()]
    stalled_agent = engine.process(stalled.name, agent_id)
    assert stalled_agent is not None and stalled_agent.kill_reason == "kept", stalled_agent

    # A look later: its files read (mounted for the read, let go of after), its output too.
    inspected = await overnight_cli(
        dev_server, "inspect", run_id, "--attempt", "1", "/workspace/app/attempt-1.txt"
    )
    assert inspected.returncode == 0, inspected.stderr
    assert "attempt 1 was here" in inspected.stdout
    logs = await overnight_cli(dev_server, "logs", run_id, "--attempt", "2")
    assert logs.returncode == 0 and "attempt 2 crashes" in logs.stdout, logs.stderr
    assert held(stalled).nothing, held(stalled)

    # `overnight disk` says so, with no server.
    code, shown, said = await _cli_without_server(dev_server, "disk", "--json")
    assert code == 0, said
    [box] = [s for s in json.loads(shown)["local"]["sandboxes"] if s["sandbox_id"] == stalled.name]
    assert box["host"] == {"processes": 0, "memory_bytes": 0, "mounts": 0, "loops": 0, "why": ""}


@pytest.mark.timeout(240)
async def test_a_sandbox_paused_with_its_agent_gone_holds_no_mount_and_the_run_goes_on(
    dev_server: DevServer,
    dev_client: Client,
    task_queue: str,
    tmp_path: Path,
    runs: list[str],
    images: None,
) -> None:
    run_id = new_run_id("letgoatt")
    runs.append(run_id)
    spec = scripted_spec(
        run_id, tmp_path, "loud-crash", env={"AGENT_HOLD": "0.2"}, budget={"max_restarts": 0}
    )
    await api.start_run(dev_client, spec, task_queue=task_queue)
    await wait_for_status(dev_client, run_id, lambda s: s.state == "needs_attention", timeout=120)
    folder = _engine().folder(f"{run_id}-1")
    assert _engine().get(f"{run_id}-1").state == "paused"

    waiting = await wait_nothing_held(folder)
    print(f"\nsandbox paused with its agent gone: {waiting.words()}")
    assert waiting.nothing, waiting

    await api.extend_budget(dev_client, run_id, BudgetExtension(restarts=1))
    result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=120)
    assert result.outcome == "finished"
    inspected = await overnight_cli(dev_server, "inspect", run_id, "--attempt", "1")
    assert inspected.returncode == 0, inspected.stderr
    assert "checkpoint.json" in inspected.stdout


@pytest.mark.timeout(180)
async def test_reap_and_disk_with_no_server_act_on_this_hosts_kept_sandboxes(
    dev_server: DevServer, tmp_path: Path, images: None
) -> None:
    # Two sandboxes kept after their run ended, each with its agent still alive and frozen
    # (as sandboxes kept before this change were): one past its keep-until, one within it.
    engine = _engine()
    run_id = new_run_id("reaphere")
    now = datetime.now(UTC)
    kept = {
        f"{run_id}-1": now - timedelta(minutes=1),
        f"{run_id}-2": now + timedelta(days=3),
    }
    for name, until in kept.items():
        await _kept_with_a_frozen_agent(engine, name, run_id, until)
    past, within = (engine.folder(name) for name in kept)
    before = held(within)
    assert before.processes, before

    try:
        code, shown, said = await _cli_without_server(dev_server, "disk")
        assert code == 0, said
        assert "its agent is alive in it, frozen, for its run to wake" in shown

        code, reaped, said = await _cli_without_server(dev_server, "reap")

        assert code == 0, said
        assert "no Temporal server at" in said and "reaped what this host holds alone" in said
        assert f"local sandbox {past.name} of {run_id}: deleted: its retention ended" in reaped
        assert f"local sandbox {within.name} of {run_id}: let go of " in reaped
        after = await wait_nothing_held(within)
        print(f"\nkept sandbox before a reap with no server: {before.words()}")
        print(f"kept sandbox after it: {after.words()}")
        assert after.nothing, after
        assert (await wait_nothing_held(past)).nothing
        assert engine.get(past.name).state == "stopped"
        assert engine.get(within.name).state == "paused"
        assert engine.read_file(within.name, "/workspace/app/note.txt", 100).data == b"kept\n"
        engine.let_go_again()

        code, shown, said = await _cli_without_server(dev_server, "disk")
        assert code == 0, said
        assert "on the host: its files only" in shown

        # With the server, `reap` lets go of a closed (here: unknown) run's kept sandbox too.
        later = f"{run_id}-3"
        kept[later] = now + timedelta(days=3)
        await _kept_with_a_frozen_agent(engine, later, run_id, kept[later])
        done = await overnight_cli(dev_server, "reap", "--json")
        assert done.returncode == 0, done.stderr
        [entry] = [e for e in json.loads(done.stdout) if e["sandbox_id"] == later]
        assert (entry["kind"], entry["stopped"]) == ("released", True), entry
        assert entry["processes"] >= 3 and entry["memory_bytes"] > 0, entry
        assert (await wait_nothing_held(engine.folder(later))).nothing
    finally:
        for name in kept:
            engine.stop(name)


async def _kept_with_a_frozen_agent(
    engine: LocalEngine, name: str, run_id: str, until: datetime
) -> None:
    """A paused sandbox labelled kept until `until`, with its agent alive and frozen."""
    engine.get_or_create(name, labels={LABEL_RUN: run_id}, disk_mib=128)
    engine.run(name, "mkdir -p /workspace/app && echo kept > /workspace/app/note.txt")
    engine.start_process(name, f"{name}-1", "sleep 3600 & exec sleep 3600")
    give_up = time.monotonic() + CAP
    while not any("bwrap" in c for c in held(engine.folder(name)).processes.values()):
        assert time.monotonic() < give_up, held(engine.folder(name))
        await asyncio.sleep(0.1)
    engine.pause(name)
    engine.set_labels(name, {LABEL_KEEP_UNTIL: label_value(until)})
