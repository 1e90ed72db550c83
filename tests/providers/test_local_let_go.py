"""A paused local sandbox holds on the host only what it must (issue 51).

On real bubblewrap sandboxes with a network of their own (slirp4netns), a host port (its
relay) and an image of their own where the worker may loop-mount: paused with a live agent,
it keeps its agent (frozen), its launcher and helpers, and its image, and `overnight disk`'s
account says why; kept after its run (`let_go`) it holds no process and no mount, its agents'
records say `kept`, and its files are still read (the image mounted again, and unmounted again
when the reader's provider closes), woken and run in. Paused with no live agent, it holds no
mount either, nor the launcher of its ended agent (which outlives it by a moment; nor does a
stopped one). What the host held is found from /proc and /sys (tests/sandbox_host_probe.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.providers.local import disk_image, kept
from activities.providers.local.disk_account import LocalDiskAccount
from activities.providers.local.disk_limit import DISK_ENV
from activities.providers.local.engine import LocalEngine
from activities.providers.local.launcher import EXIT_FILE, PROCESS_FILE
from activities.providers.local.provider import LocalProvider
from activities.providers.local.snapshots import LocalSnapshots
from tests.sandbox_host_probe import MIB, held, wait_nothing_held
from tests.waits import CAP

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
IMAGES = disk_image.unavailable(Path("/tmp")) is None


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalEngine]:
    if IMAGES:
        monkeypatch.setenv(DISK_ENV, "image")  # the loop mounts the finding counted
    engine = LocalEngine(tmp_path / "home")
    try:
        yield engine
    finally:
        for meta in engine.list_sandboxes():
            engine.stop(meta.id)
        disk_image.detach(tmp_path)


@pytest.fixture
def host_port() -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def _with_agent(engine: LocalEngine, name: str, port: int) -> None:
    engine.get_or_create(name, disk_mib=128, host_ports=[port])
    engine.run(name, "mkdir -p /workspace/app && echo kept > /workspace/app/note.txt")
    # An agent with a helper of its own, waiting (on a person, say).
    engine.start_process(name, f"{name}-1", "sleep 3600 & exec sleep 3600")
    give_up = time.monotonic() + 30
    while len(held(engine.folder(name)).processes) < 4 and time.monotonic() < give_up:
        time.sleep(0.1)


@pytest.mark.timeout(120)
async def test_a_kept_sandbox_lets_go_of_every_host_process_and_mount_and_its_files_still_read(
    engine: LocalEngine, host_port: int
) -> None:
    _with_agent(engine, "keep-1", host_port)
    engine.pause("keep-1")
    folder = engine.folder("keep-1")
    before = held(folder)
    launcher = [cmd for cmd in before.processes.values() if "launcher.py" in cmd]
    assert launcher and any("bwrap" in cmd for cmd in before.processes.values()), before
    if IMAGES:
        assert before.loops and before.mounts
    # Paused with its agent alive: it holds them, and says why.
    account = LocalDiskAccount(engine)
    [shown] = [s for s in (await account.usage()).sandboxes if s.sandbox_id == "keep-1"]
    assert shown.host is not None and shown.host.processes >= 4
    assert "its agent is alive in it, frozen, for its run to wake" in shown.host.why

    provider = LocalProvider(engine)
    kept = await provider.let_go("keep-1")

    after = await wait_nothing_held(folder)
    print(f"\nkept sandbox on the host: before {before.words()}; after {after.words()}")
    assert after.nothing, after
    assert kept.state == "paused"
    record = engine.process("keep-1", "keep-1-1")
    assert record is not None and (record.state, record.kill_reason) == ("killed", "kept")
    [shown] = [s for s in (await account.usage()).sandboxes if s.sandbox_id == "keep-1"]
    assert shown.host is not None and shown.host.nothing and shown.host.why == ""

    # A look later (logs, inspect): its files are there, mounted again for the read, and let
    # go of again when the reader's provider closes.
    reader = LocalProvider(LocalEngine(engine.home))
    read = await reader.read_file("keep-1", "/workspace/app/note.txt", 100)
    assert read.data == b"kept\n"
    await reader.aclose()
    assert held(folder).nothing
    # Woken (a run going on in it): its image is back and commands run.
    engine.wake("keep-1")
    assert engine.run("keep-1", "cat /workspace/app/note.txt").stdout == "kept\n"
    assert before.memory_bytes > 5 * MIB


@pytest.mark.timeout(120)
def test_a_sandbox_paused_with_no_live_agent_holds_no_mount(
    engine: LocalEngine, host_port: int
) -> None:
    engine.get_or_create("idle-1", disk_mib=128, host_ports=[host_port])
    engine.run("idle-1", "mkdir -p /workspace/app && echo here > /workspace/app/note.txt")
    engine.start_process("idle-1", "idle-1-1", "exit 3")  # an agent that crashed
    give_up = time.monotonic() + 30
    while engine.process("idle-1", "idle-1-1").state == "running":  # type: ignore[union-attr]
        assert time.monotonic() < give_up
        time.sleep(0.05)

    engine.pause("idle-1")

    assert held(engine.folder("idle-1")).nothing, held(engine.folder("idle-1"))
    # A snapshot of it ("recovery": "snapshot") copies its files, not the empty mount point.
    snapshots = LocalSnapshots(engine)
    snap = snapshots.take("idle-1", name="idle-snap", mode="disk", labels={}, retention_days=1)
    copied = snapshots.root / snap["id"] / "workspace" / "app" / "note.txt"
    assert copied.read_text() == "here\n"
    assert engine.let_go_again() == ["idle-1"]
    assert engine.read_file("idle-1", "/workspace/app/note.txt", 100).data == b"here\n"
    assert engine.let_go_again() == ["idle-1"]
    assert held(engine.folder("idle-1")).nothing
    engine.wake("idle-1")
    assert engine.run("idle-1", "cat /workspace/app/note.txt").stdout == "here\n"


def _stat(pid: int) -> tuple[str, int, str]:
    """(state, parent pid, command name) of `pid`, from /proc ("" when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "", 0, ""
    name, rest = stat.split("(", 1)[1].rsplit(")", 1)
    state, parent = rest.split()[:2]
    return state, int(parent), name


def _children(pid: int, name: str) -> list[int]:
    found = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    return [child for child in found if _stat(child)[1:] == (pid, name)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("end", ["pause", "stop"])
def test_a_pause_or_stop_just_after_an_agent_ended_leaves_no_launcher_behind(
    engine: LocalEngine, host_port: int, end: str
) -> None:
    """An agent's launcher lives on after it wrote how the agent ended (it ends the network
    helpers, then itself): a pause or a stop then waits for it, and ends one that lingers, so
    the sandbox holds no process when either returns (a stopped one's folder is then in the
    trash, but for its records). Here it lingers for sure: its slirp4netns is stopped (the
    launcher waits on it), and once the exit is written, so is the launcher."""
    engine.get_or_create("late-1", disk_mib=128, host_ports=[host_port])
    go = engine.folder("late-1") / "workspace" / "go"
    engine.start_process(
        "late-1", "late-1-1", "until [ -e /workspace/go ]; do sleep 0.05; done; exit 3"
    )
    proc_dir = engine.folder("late-1") / "processes" / "late-1-1"
    launcher_pid = json.loads((proc_dir / PROCESS_FILE).read_text())["launcher_pid"]
    slirp = _children(launcher_pid, "slirp4netns")
    assert slirp, "the sandbox's network has a slirp4netns"
    try:
        for pid in slirp:
            os.kill(pid, signal.SIGSTOP)
        go.touch()
        give_up = time.monotonic() + CAP
        while not (proc_dir / EXIT_FILE).exists():
            assert time.monotonic() < give_up
            time.sleep(0.01)
        # Its launcher now waits on the stopped slirp4netns (2 s, then kills it): stopped
        # there too, it lingers for as long as it takes.
        with contextlib.suppress(ProcessLookupError):  # gone already: nothing to hold
            os.kill(launcher_pid, signal.SIGSTOP)

        if end == "pause":
            engine.pause("late-1")
        else:
            engine.stop("late-1")

        assert held(engine.folder("late-1")).nothing, held(engine.folder("late-1"))
        record = engine.process("late-1", "late-1-1")
        assert record is not None and (record.state, record.exit_code) == ("exited", 3)
    finally:
        for pid in [*slirp, launcher_pid]:
            if _stat(pid)[0] == "T":  # still stopped: a pause or stop that failed left it so
                os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(120)
@pytest.mark.skipif(not IMAGES, reason="no loop-mounted images here")
def test_an_image_with_a_file_open_on_the_host_stays_mounted_until_it_is_closed(
    engine: LocalEngine,
) -> None:
    engine.get_or_create("open-1", disk_mib=128)
    engine.run("open-1", "mkdir -p /workspace/app && echo open > /workspace/app/note.txt")
    folder = engine.folder("open-1")
    with open(folder / "workspace" / "app" / "note.txt") as reader:
        engine.pause("open-1")
        # Never unmounted lazily: mounting it again beside a live old mount would make two
        # writers of one filesystem.
        assert len(held(folder).mounts) == 4 and engine.get("open-1").released_at is None
        assert reader.read() == "open\n"
    engine.let_go("open-1")
    assert held(folder).nothing and engine.get("open-1").released_at is not None
    assert engine.read_file("open-1", "/workspace/app/note.txt", 100).data == b"open\n"


@contextlib.contextmanager
def _loop_opened(loop: str, seconds: float) -> Iterator[subprocess.Popen[str]]:
    """Another user of the image's loop device for `seconds` (as a mount namespace being torn
    down, or a probe, is for a moment): the kernel detaches it only when its last user closes
    it, whatever unmounted it before."""
    code = (
        f"import os, time\nfd = os.open('/dev/{loop}', os.O_RDONLY)\nprint('open', flush=True)\n"
        f"time.sleep({seconds})\nos.close(fd)"
    )
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as user:
        try:
            assert user.stdout is not None and user.stdout.readline() == "open\n"
            yield user
        finally:
            user.kill()


@pytest.mark.timeout(120)
@pytest.mark.skipif(not IMAGES, reason="no loop-mounted images here")
def test_a_pause_returns_once_its_loop_device_is_detached_or_says_it_is_not(
    engine: LocalEngine, host_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.get_or_create("loop-1", disk_mib=128, host_ports=[host_port])
    engine.run("loop-1", "echo here > /workspace/note.txt")
    folder = engine.folder("loop-1")
    [loop] = disk_image.loops_of(folder)

    # Its loop device outlives the unmount by a moment (another user closing it): the pause
    # waits for it.
    with _loop_opened(loop, 1.5):
        engine.pause("loop-1")
        assert held(folder).nothing, held(folder)
    assert engine.get("loop-1").loop_held is None

    # One that stays attached past the wait's cap: the pause says so, and so does the
    # account of what the sandbox holds.
    engine.wake("loop-1")
    [loop] = disk_image.loops_of(folder)
    monkeypatch.setattr(kept, "LOOP_DETACH_SECONDS", 0.2)
    with _loop_opened(loop, 60):
        paused = engine.pause("loop-1")
        # Another test's sandbox setting up beside this one may have copied the image's mount
        # into its namespace while it was mounted (seen in CI): a copy not this sandbox's,
        # which the pause does not report, by design (disk_image.foreign_copies).
        if disk_image.foreign_copies([loop]):
            assert paused.loop_held is None
        else:
            assert paused.loop_held == f"{loop} still attached 0.2 s after the unmount"
            assert engine.holds("loop-1").loops == 1
        assert not engine.holds("loop-1").mounts
    # Closed, it is detached; woken, the sandbox has its files.
    assert disk_image.wait_loops_gone(folder, CAP) == []
    engine.wake("loop-1")
    assert engine.run("loop-1", "cat /workspace/note.txt").stdout == "here\n"
