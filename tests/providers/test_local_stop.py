"""A stopped local sandbox runs nothing: `stop` returns only once every process of it is gone.

Attacks on real bubblewrap sandboxes, each seen after `stop` returns through the sandbox's
cgroups (`cgroup.procs` of every one it joins) and its agent's PID namespace (a scan of /proc):

- a process caught between joins: in the sandbox's limit cgroups but not yet in its
  freezer's (a command's join goes one cgroup at a time, the freezer's last), which the
  freezer's kill alone missed and which then ran on in the stopped sandbox;
- a stop cut short after it marked the sandbox stopped (its worker killed), with a setsid
  daemon left running and no launcher to end it: the next stop must kill, not just free
  (unisolated: an isolated sandbox dies with its launcher, bwrap's `--die-with-parent`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.providers.local import cgroups
from activities.providers.local.engine import LocalEngine
from activities.providers.local.procs import pid_alive
from tests.waits import CAP

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

# Leaves its process group and session (double fork, setsid), then ticks and forks on. The
# first parent exits only once its child has left the group: the launcher kills the agent's
# group when the agent exits, which on a loaded machine took a child not yet out of it.
# Relative paths: an unisolated sandbox's commands see their workspace folder, not /workspace.
DAEMON = textwrap.dedent(
    """
    import os, time
    left, told = os.pipe()
    if os.fork() > 0:
        os.read(left, 1)
        os._exit(0)
    os.setsid()
    os.write(told, b"x")
    if os.fork() > 0:
        os._exit(0)
    while True:
        with open("ticks", "a") as out:
            out.write(f"{time.time()}\\n")
        if os.fork() == 0:
            time.sleep(0.5)
            os._exit(0)
        time.sleep(0.1)
    """
)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[LocalEngine]:
    engine = LocalEngine(tmp_path / "home")
    yield engine
    for meta in engine.list_sandboxes(include_stopped=True):
        for pid in still_in(list(meta.cgroups)):  # whatever a failed test left running
            os.kill(pid, signal.SIGKILL)
        engine.stop(meta.id)


def wait_for(check: object, timeout: float = CAP) -> bool:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def still_in(folders: list[str]) -> set[int]:
    return {pid for folder in folders if Path(folder).is_dir() for pid in cgroups.members(folder)}


def test_stop_kills_a_process_that_joined_the_limit_cgroups_but_not_yet_the_freezers(
    engine: LocalEngine, tmp_path: Path
) -> None:
    sid = f"join-{uuid.uuid4().hex[:8]}"
    meta, _ = engine.get_or_create(sid, timeout_seconds=120)
    others = [folder for folder in meta.cgroups if folder != meta.cgroup]
    if meta.cgroup is None or not others:
        pytest.skip(f"no limit cgroups beside the freezer's here: {meta.no_cgroup or meta.freezer}")
    joined = tmp_path / "joined"
    # The join as a command does it, held between the limits' cgroups and the freezer's.
    rest = f'touch {joined}; sleep 1; echo $$ > "{meta.cgroup}/cgroup.procs"; exec sleep 300'
    caught = subprocess.Popen([*cgroups.join_prefix(others), "/bin/sh", "-c", rest])
    try:
        assert wait_for(joined.exists), "the process never joined"

        engine.stop(sid)

        assert caught.wait(timeout=CAP) == -signal.SIGKILL  # (else it sleeps 300 s)
        assert still_in(list(meta.cgroups)) == set()
        assert [folder for folder in meta.cgroups if Path(folder).exists()] == []
    finally:
        if caught.poll() is None:
            caught.kill()
            caught.wait()


def test_a_stop_after_one_cut_short_kills_what_still_runs(engine: LocalEngine) -> None:
    sid = f"cut-{uuid.uuid4().hex[:8]}"
    meta, _ = engine.get_or_create(sid, timeout_seconds=120, isolation="none")
    if meta.cgroup is None:
        pytest.skip(f"no cgroup here: {meta.no_cgroup}")
    engine.write_file(sid, "/workspace/daemon.py", DAEMON.encode())
    engine.start_process(sid, "k-1", f"{sys.executable} daemon.py", cwd="/workspace")
    ticks = engine.host_path(sid, "/workspace/ticks")
    assert wait_for(ticks.exists), "the daemon never ticked"
    started = json.loads((engine.folder(sid) / "processes" / "k-1" / "process.json").read_text())
    # The agent's own shell has exited; its launcher is gone too (nothing else watches now),
    # and the stop that had marked the sandbox stopped died before it killed anything.
    os.kill(started["launcher_pid"], signal.SIGKILL)
    assert wait_for(lambda: not pid_alive(started["launcher_pid"]))
    cut_short = dataclasses.replace(
        engine.get(sid), state="stopped", stop_reason="stopped", stopped_at=time.time()
    )
    (engine.folder(sid) / "sandbox.json").write_text(json.dumps(dataclasses.asdict(cut_short)))
    assert still_in(list(meta.cgroups)), "the daemon is not running"

    stopped = engine.stop(sid)

    assert stopped.state == "stopped" and stopped.freed_at is not None
    assert still_in(list(meta.cgroups)) == set()
    assert [folder for folder in meta.cgroups if Path(folder).exists()] == []
