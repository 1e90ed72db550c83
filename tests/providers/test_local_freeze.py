"""A paused local sandbox runs nothing, however its processes fork; its process cap is its own.

Attacks on real bubblewrap sandboxes: a fork chain that sends SIGCONT to everything it can
(which outran a pause made of SIGSTOPs), and a kept sandbox full of processes of the run's
user (which used up a per-user process limit, so the next attempt could not fork).
"""

from __future__ import annotations

import json
import shutil
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.models import SandboxInfo
from activities.providers.local import cgroups, ns
from activities.providers.local.cgroup_layout import CGROUPS_ENV
from activities.providers.local.convert import sandbox_info
from activities.providers.local.engine import LocalEngine
from activities.providers.local.mounts import shim_python
from tests import waits

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

# Forks a 0.2 s ticker, then two chains: each link forks the next and exits, and the new one
# sends SIGCONT to every process it may signal (kill -1), so no link lives long enough for a
# scan of /proc to stop it; out of processes, a link waits and sends SIGCONT again.
FORK_CHAIN = textwrap.dedent(
    """
    import os, signal, time

    def chain():
        while True:
            try:
                if os.fork() > 0:
                    os._exit(0)
            except OSError:
                time.sleep(0.01)
            try:
                os.kill(-1, signal.SIGCONT)
            except OSError:
                pass

    if os.fork() == 0:
        while True:
            with open("/workspace/ticks", "a") as out:
                out.write(f"{time.time()}\\n")
            time.sleep(0.2)
    for _ in range(2):
        if os.fork() == 0:
            chain()
    while True:
        time.sleep(1)
    """
)


# Forks until it may not, never reaping: half its children sleep, half are zombies; then
# writes how many it made.
FILL = textwrap.dedent(
    """
    import os, time
    made = 0
    while True:
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            if made % 2:
                time.sleep(300)
            os._exit(0)
        made += 1
    # Written whole, then renamed: the test reads the count as soon as the file exists.
    with open("/workspace/full.part", "w") as out:
        out.write(str(made))
    os.rename("/workspace/full.part", "/workspace/full")
    time.sleep(300)
    """
)
CAP = 40


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[LocalEngine]:
    engine = LocalEngine(tmp_path / "home")
    yield engine
    for meta in engine.list_sandboxes():
        engine.stop(meta.id)


def ticks(engine: LocalEngine, sid: str) -> list[float]:
    path = engine.host_path(sid, "/workspace/ticks")
    try:
        return [float(line) for line in path.read_text().split()]
    except (OSError, ValueError):
        return []


def wait_for(check: object, timeout: float = waits.CAP) -> bool:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("freezer", ["auto", "cgroup1"])
def test_a_fork_chain_sending_sigcont_runs_nothing_while_the_sandbox_is_paused(
    engine: LocalEngine, monkeypatch: pytest.MonkeyPatch, freezer: str
) -> None:
    monkeypatch.setenv(CGROUPS_ENV, freezer)
    sid = f"chain-{uuid.uuid4().hex[:8]}"
    meta, _ = engine.get_or_create(sid, timeout_seconds=120)
    if meta.freezer not in cgroups.FROZEN_KINDS:
        pytest.skip(f"no cgroup freezer ({freezer}) here: {meta.no_cgroup}")
    engine.write_file(sid, "/workspace/chain.py", FORK_CHAIN.encode())
    engine.start_process(sid, "k-1", f"{shim_python()} /workspace/chain.py", cwd="/workspace")
    assert wait_for(lambda: len(ticks(engine, sid)) >= 3), "the ticker never ticked"

    engine.pause(sid)
    paused_at = time.time()
    time.sleep(3)
    woken_at = time.time()
    during = [t for t in ticks(engine, sid) if paused_at < t < woken_at]
    engine.wake(sid)

    assert during == [], f"{len(during)} ticks in a 3 s pause"
    assert wait_for(lambda: any(t > woken_at for t in ticks(engine, sid))), (
        "ticking did not resume after the wake"
    )


def test_a_kept_sandbox_full_of_processes_leaves_the_next_attempt_free_to_fork(
    engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OVERNIGHT_SANDBOX_PROCESSES", str(CAP))
    run = f"cap-{uuid.uuid4().hex[:8]}"
    labels = {"overnight-run": run}
    kept, fresh = f"{run}-1", f"{run}-2"
    engine.get_or_create(kept, labels=labels, timeout_seconds=120)
    engine.get_or_create(fresh, labels=labels, timeout_seconds=120)
    assert engine.get(kept).uid == engine.get(fresh).uid, "one run, one user"
    engine.write_file(kept, "/workspace/fill.py", FILL.encode())
    engine.start_process(kept, "k-1", f"{shim_python()} /workspace/fill.py", cwd="/workspace")
    assert wait_for(lambda: engine.host_path(kept, "/workspace/full").exists())
    made = int(engine.host_path(kept, "/workspace/full").read_text())
    assert 0 < made < CAP, f"{made} processes: the kept sandbox has no cap of {CAP}"
    engine.pause(kept)  # set aside, kept for a look, its processes held

    forks = engine.run(
        fresh, "for i in $(seq 20); do sleep 0.1 & done; wait; echo forked", cwd="/workspace"
    )
    assert (forks.exit_code, forks.stdout) == (0, "forked\n"), forks.stderr[-500:]


def test_stop_kills_a_fork_chain_and_removes_the_sandboxs_cgroups(engine: LocalEngine) -> None:
    sid = f"chain-{uuid.uuid4().hex[:8]}"
    meta, _ = engine.get_or_create(sid, timeout_seconds=120)
    if meta.cgroup is None:
        pytest.skip(f"no cgroup here: {meta.no_cgroup}")
    engine.write_file(sid, "/workspace/chain.py", FORK_CHAIN.encode())
    engine.start_process(sid, "k-1", f"{shim_python()} /workspace/chain.py", cwd="/workspace")
    assert wait_for(lambda: len(cgroups.members(meta.cgroup)) >= 4)  # type: ignore[arg-type]

    engine.stop(sid)

    assert [folder for folder in meta.cgroups if Path(folder).exists()] == []
    record = engine.process(sid, "k-1")
    assert record is not None and record.state == "killed"


def test_without_a_cgroup_a_pause_ends_the_agents_keeps_the_files_and_says_so(
    engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CGROUPS_ENV, "none")
    sid = f"bare-{uuid.uuid4().hex[:8]}"
    meta, _ = engine.get_or_create(sid, timeout_seconds=120)
    info: SandboxInfo = sandbox_info(meta)
    assert meta.freezer == "none" and info.pause_ends_agents
    assert info.isolation is not None and "no cgroup here" in info.isolation
    assert "a pause ends its agents (files kept)" in info.isolation
    engine.start_process(sid, "k-1", "echo kept > /workspace/note; exec sleep 300")
    note = engine.host_path(sid, "/workspace/note")
    assert wait_for(lambda: note.exists() and note.read_text() == "kept\n")  # written, not made

    assert engine.pause(sid).state == "paused"

    record = engine.process(sid, "k-1")
    assert record is not None and (record.state, record.kill_reason) == ("killed", "paused")
    assert engine.host_path(sid, "/workspace/note").read_text() == "kept\n"
    woken = engine.wake(sid)
    assert woken.state == "running" and sandbox_info(woken).pause_ends_agents
    again, _ = engine.start_process(sid, "k-2", "cat /workspace/note", cwd="/workspace")
    assert again.state in ("running", "exited")


def test_without_a_cgroup_the_lease_end_ends_the_agents(
    engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CGROUPS_ENV, "none")
    sid = f"bare-{uuid.uuid4().hex[:8]}"
    engine.get_or_create(sid, timeout_seconds=1.0, on_lease_end="pause")
    engine.start_process(sid, "k-1", "sleep 300")
    exit_file = engine.folder(sid) / "processes" / "k-1" / "exit.json"

    # Nobody asks the engine: the launcher pauses the sandbox, ending its agent.
    assert wait_for(exit_file.exists)
    assert json.loads((engine.folder(sid) / "sandbox.json").read_text())["state"] == "paused"
    assert json.loads(exit_file.read_text())["reason"] == "paused"


def test_a_sandbox_made_before_cgroups_still_pauses_with_sigstop(
    engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CGROUPS_ENV, "none")
    sid = f"old-{uuid.uuid4().hex[:8]}"
    engine.get_or_create(sid, timeout_seconds=120)
    # Its sandbox.json as written before cgroups: none of their fields.
    state = engine.folder(sid) / "sandbox.json"
    old = json.loads(state.read_text())
    for field in ("freezer", "cgroup", "cgroups", "cgroup_limits", "systemd_slice", "no_cgroup"):
        old.pop(field)
    state.write_text(json.dumps(old))
    assert engine.get(sid).freezer == "signals" and not engine.get(sid).pause_ends_agents()
    engine.start_process(sid, "k-1", "exec sleep 300")
    started = json.loads((engine.folder(sid) / "processes" / "k-1" / "process.json").read_text())

    def states() -> set[str]:
        return {
            Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            for pid in ns.members(started["pid_ns"])
        }

    engine.pause(sid)
    assert states() == {"T"}
    engine.wake(sid)
    assert wait_for(lambda: "T" not in states())
    assert engine.process(sid, "k-1").state == "running"  # type: ignore[union-attr]
