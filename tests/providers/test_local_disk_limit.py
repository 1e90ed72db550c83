"""A local sandbox's disk is limited: an agent cannot fill the worker's disk.

The attack, in a real bubblewrap sandbox with `disk_mib` 64: `fallocate -l 1G` and 100,000
folders. With an image (a root worker that may loop-mount) the kernel refuses the writes
inside (`ENOSPC`) and the host loses at most the limit; elsewhere the worker measures the
sandbox and pauses it with `disk limit of 64 MiB reached`. Either way a second sandbox still
works, and the worker's floor of free space refuses new sandboxes below it. The image is
unmounted and deleted with its sandbox, survives a new worker (and a reboot, mounted again),
what a killed create or stop left mounted is unmounted by `overnight reap`, and `overnight
disk` counts the image once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from activities.models import SandboxInfo
from activities.providers.local import disk_image, disk_watch
from activities.providers.local.disk import tree_bytes
from activities.providers.local.disk_account import LocalDiskAccount
from activities.providers.local.disk_limit import (
    DISK_ENV,
    LOW_DISK,
    MIN_FREE_ENV,
    worker_summary,
)
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.local.snapshots import LocalSnapshots
from activities.providers.protocol import AgentLaunch, ProviderError, SandboxRequest, WatchRequest
from overnight.core.constants import LABEL_RUN
from tests.waits import CAP

MIB = 1024 * 1024
LIMIT_MIB = 64
NOW = datetime.now(UTC)
# What the worker's own files beside the image may hold, on top of the limit.
SLACK = 16 * MIB
FOLDERS = (
    'python3 -c "import os\nn=0\ntry:\n    for i in range(100000):\n'
    "        os.mkdir(f'/tmp/d{i}'); n+=1\nexcept OSError as e:\n    print('stopped', n, e)\n"
    "print('made', n)\""
)
bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
needs_images = pytest.mark.skipif(
    disk_image.unavailable(Path("/tmp")) is not None,
    reason=f"no loop-mounted images here: {disk_image.unavailable(Path('/tmp'))}",
)


@pytest.fixture
def images(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISK_ENV, "image")


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISK_ENV, "watch")
    monkeypatch.setattr(disk_watch, "MIN_INTERVAL", 0.3)  # not 10 s: a test is short
    # Nor 50 times a measure's cost: that cost is wall time, which load stretches (a measure
    # of 1,635 folders took 0.37 s beside two busy loops, the next one due 18.5 s later; at
    # load 25 the next could be past any wait). The spacing is the worker's; the test asserts
    # the pause.
    monkeypatch.setattr(disk_watch, "MAX_INTERVAL", 1.0)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[LocalEngine]:
    engine = LocalEngine(tmp_path / "home")
    try:
        yield engine
    finally:
        for meta in engine.list_sandboxes():
            engine.stop(meta.id)
        disk_image.detach(tmp_path)


def _held_on_host(engine: LocalEngine) -> int:
    """What the worker's home takes on the host's disk, an image counted as its file (not its
    mounted content). Not the disk's free space, which every other process on the machine
    moves meanwhile (by about 1 GB under the suite)."""
    return tree_bytes(engine.home, one_filesystem=True)


def _make(engine: LocalEngine, name: str, **options: object) -> None:
    engine.get_or_create(
        name,
        labels={LABEL_RUN: name},
        disk_mib=LIMIT_MIB,
        **options,  # type: ignore[arg-type]
    )


# ----- with an image: the kernel holds the limit -----


@bwrap
@needs_images
def test_an_agent_cannot_fallocate_past_its_image_and_the_host_loses_at_most_the_limit(
    engine: LocalEngine, images: None
) -> None:
    engine.home.mkdir(parents=True)
    before = _held_on_host(engine)
    _make(engine, "fill-1")
    assert engine.get("fill-1").disk == "image"

    out = engine.run("fill-1", "fallocate -l 1G /workspace/big; echo exit=$?")

    assert "No space left on device" in out.stderr and "exit=1" in out.stdout, out
    assert _held_on_host(engine) - before <= LIMIT_MIB * MIB + SLACK


@bwrap
@needs_images
def test_an_agent_cannot_make_100000_folders_in_its_image(
    engine: LocalEngine, images: None
) -> None:
    _make(engine, "inodes-1")

    out = engine.run("inodes-1", FOLDERS)

    assert "No space left on device" in out.stdout, out
    made = int(out.stdout.split("made ")[1])
    assert 1000 < made < 100_000


@bwrap
@needs_images
def test_a_second_sandbox_works_beside_a_full_one(engine: LocalEngine, images: None) -> None:
    _make(engine, "full-1")
    engine.run("full-1", "fallocate -l 1G /workspace/big; " + FOLDERS)
    _make(engine, "next-1")

    out = engine.run("next-1", "echo fine > /workspace/x && cat /workspace/x && ls ~ /tmp")

    assert out.exit_code == 0 and out.stdout.startswith("fine"), out


@needs_images
def test_a_stop_unmounts_and_deletes_the_image_and_counts_what_it_held(
    engine: LocalEngine, images: None
) -> None:
    _make(engine, "gone-1", isolation="none")
    folder = engine.folder("gone-1")
    (folder / "workspace" / "blob").write_bytes(os.urandom(8 * MIB))
    assert len(disk_image.mounts_under(folder)) == 4

    stopped = engine.stop("gone-1")

    assert disk_image.mounts_under(folder) == []
    assert not (folder / disk_image.IMAGE_FILE).exists()
    assert sorted(p.name for p in folder.iterdir()) == [".lock", "processes", "sandbox.json"]
    assert 8 * MIB <= (stopped.freed_bytes or 0) < 16 * MIB


@needs_images
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare")
def test_a_stop_counts_what_the_image_held_while_another_mount_namespace_still_holds_it(
    engine: LocalEngine, images: None
) -> None:
    _make(engine, "held-1", isolation="none")
    (engine.folder("held-1") / "workspace" / "blob").write_bytes(os.urandom(8 * MIB))
    # A process that made a mount namespace while the image was mounted (another sandbox's
    # bubblewrap setting up, an `unshare`) has a copy of its mount: the stop's unmount then
    # leaves the filesystem alive, the blob's bytes in memory, not yet in disk.img.
    holder = subprocess.Popen(["unshare", "--mount", "sleep", "infinity"])
    try:
        _wait_own_mount_namespace(holder.pid)
        stopped = engine.stop("held-1")
    finally:
        holder.kill()
        holder.wait()

    assert 8 * MIB <= (stopped.freed_bytes or 0) < 16 * MIB


def _wait_own_mount_namespace(pid: int) -> None:
    mine = os.readlink("/proc/self/ns/mnt")
    give_up = time.monotonic() + 60
    while time.monotonic() < give_up:
        if os.readlink(f"/proc/{pid}/ns/mnt") != mine:
            return
        time.sleep(0.02)
    raise AssertionError(f"unshare --mount (pid {pid}) made no mount namespace")


@needs_images
def test_a_paused_sandbox_with_no_agent_lets_go_of_its_image_and_a_wake_mounts_it_again(
    engine: LocalEngine, images: None
) -> None:
    _make(engine, "kept-1", isolation="none")
    (engine.folder("kept-1") / "workspace" / "note").write_text("kept")
    engine.pause("kept-1")
    # Nothing alive in it: its image is not held mounted (issue 51); its files are kept.
    assert disk_image.mounts_under(engine.folder("kept-1")) == []

    restarted = LocalEngine(engine.home)  # another worker process, the same machine
    restarted.wake("kept-1")
    assert len(disk_image.mounts_under(engine.folder("kept-1"))) == 4

    assert restarted.read_file("kept-1", "/workspace/note", 100).data == b"kept"
    restarted.stop("kept-1")
    assert disk_image.mounts_under(engine.folder("kept-1")) == []


@needs_images
def test_after_a_reboot_a_kept_sandboxs_image_is_mounted_again(
    engine: LocalEngine, images: None
) -> None:
    _make(engine, "boot-1", isolation="none")
    (engine.folder("boot-1") / "workspace" / "note").write_text("still here")
    engine.pause("boot-1")
    disk_image.detach(engine.folder("boot-1"))  # what a reboot does to its mounts

    assert engine.read_file("boot-1", "/workspace/note", 100).data == b"still here"
    assert len(disk_image.mounts_under(engine.folder("boot-1"))) == 4
    # A stop under way is never undone: it unmounts under the lock this mounts under, and
    # the sandbox is asked again there.
    disk_image.detach(engine.folder("boot-1"))
    disk_image.attached(engine.folder("boot-1"), lambda: False)
    assert disk_image.mounts_under(engine.folder("boot-1")) == []
    engine.stop("boot-1")
    assert disk_image.mounts_under(engine.folder("boot-1")) == []


@needs_images
async def test_reap_unmounts_what_a_killed_create_or_stop_left_mounted(
    engine: LocalEngine, images: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    half = engine.sandboxes_dir / "half-1"
    half.mkdir(parents=True)
    disk_image.attach(half, LIMIT_MIB)  # a create killed before its state was written
    _make(engine, "cut-1", isolation="none")
    detach = disk_image.detach

    def killed(folder: Path, **_: object) -> list[Path]:
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(disk_image, "detach", killed)
    with pytest.raises(KeyboardInterrupt):
        engine.stop("cut-1")  # killed after its agents, before its image was unmounted
    monkeypatch.setattr(disk_image, "detach", detach)
    assert engine.get("cut-1").freed_at is None

    done = await LocalDiskAccount(engine).finish_deletes(NOW)

    assert {d.what for d in done} >= {"half-1", "cut-1"}
    assert disk_image.mounts_under(engine.sandboxes_dir) == []
    assert not (half / disk_image.IMAGE_FILE).exists()
    assert engine.get("cut-1").freed_at is not None


@needs_images
async def test_overnight_disk_counts_the_image_once_with_its_limit_and_use(
    engine: LocalEngine, images: None
) -> None:
    _make(engine, "size-1", isolation="none")
    (engine.folder("size-1") / "workspace" / "blob").write_bytes(os.urandom(8 * MIB))

    usage = await LocalDiskAccount(engine).usage()

    (box,) = usage.sandboxes
    assert 8 * MIB <= box.size_bytes < 14 * MIB  # the image file, not its files again
    assert box.limit_bytes == LIMIT_MIB * MIB
    assert box.used_bytes is not None and 8 * MIB <= box.used_bytes < 14 * MIB


@needs_images
def test_a_snapshot_is_restored_onto_a_new_sandboxs_image(
    engine: LocalEngine, images: None
) -> None:
    _make(engine, "snap-1", isolation="none")
    (engine.folder("snap-1") / "workspace" / "app").mkdir()
    (engine.folder("snap-1") / "workspace" / "app" / "work").write_text("done so far")
    engine.pause("snap-1")
    snapshots = LocalSnapshots(engine)
    record = snapshots.take("snap-1", name="s1", mode="disk", labels={}, retention_days=1)
    _make(engine, "snap-2", isolation="none")

    snapshots.restore_into(record["id"], "snap-2")

    assert engine.read_file("snap-2", "/workspace/app/work", 100).data == b"done so far"
    assert len(disk_image.mounts_under(engine.folder("snap-2"))) == 4


# ----- measured: the worker pauses the sandbox past its limit -----


async def _watch_until_paused(provider: LocalProvider, name: str, command: str) -> SandboxInfo:
    process = await provider.start_agent(name, AgentLaunch(f"{name}-1-0", command, "/workspace"))
    give_up, token = time.monotonic() + CAP, None
    while time.monotonic() < give_up:
        seen = await provider.watch(
            WatchRequest(
                name, process.process_id, "/workspace/checkpoint.json", token=token, wait_seconds=5
            )
        )
        token = seen.token
        if seen.sandbox.state != "running":
            return seen.sandbox
    raise AssertionError("the sandbox was not paused")


@bwrap
@pytest.mark.parametrize(
    ("attack", "detail"),
    [
        ("fallocate -l 1G /workspace/big", "MiB used"),
        (FOLDERS.replace("100000", "5000"), "files and folders"),
    ],
)
async def test_a_measured_sandbox_past_its_limit_is_paused_with_the_disk_reason(
    engine: LocalEngine, measured: None, attack: str, detail: str
) -> None:
    provider = LocalProvider(engine)
    request = SandboxRequest("watched-1", {LABEL_RUN: "w"}, 600, 2, 4096, disk_mib=LIMIT_MIB)
    info, _ = await provider.get_or_create(request)
    assert "disk at most 64 MiB (measured: paused past it)" in (info.isolation or "")

    paused = await _watch_until_paused(provider, "watched-1", f"{attack}; sleep 60")

    assert paused.state == "paused"
    assert paused.pause_reason is not None
    assert paused.pause_reason.startswith("disk limit of 64 MiB reached"), paused.pause_reason
    assert detail in paused.pause_reason
    # Woken, it would write on: it stays paused, kept for a look.
    assert (await provider.wake("watched-1")).state == "paused"


def test_a_measure_stops_at_the_first_limit_passed(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    for i in range(2000):
        (workspace / f"f{i}").touch()

    found = disk_watch.measure(tmp_path, 64 * MIB, 100)

    assert found.over and found.entries == 101


def test_a_measure_follows_no_link_out_of_the_sandbox(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "host").symlink_to("/usr")

    found = disk_watch.measure(tmp_path, 64 * MIB, 10_000)

    assert not found.over and found.entries == 1


def test_a_folder_the_agent_made_unreadable_is_measured_all_the_same(tmp_path: Path) -> None:
    # A worker that is not root is the agent's own user: `chmod 000` must hide nothing.
    root = tmp_path if os.geteuid() != 0 else Path(tempfile.mkdtemp(prefix="measure-"))
    try:
        hidden = root / "workspace" / "hidden"
        hidden.mkdir(parents=True)
        for i in range(50):
            (hidden / f"f{i}").write_bytes(b"x" * 10)
        user = None
        if os.geteuid() == 0:
            user = 65534  # measured as an ordinary user owning the files, as such a worker is
            for path in (root, root / "workspace", hidden, *hidden.iterdir()):
                os.chown(path, user, user)
        hidden.chmod(0)

        assert _measured_as(user, root).entries == 51
    finally:
        if root != tmp_path:
            shutil.rmtree(root)


def _measured_as(user: int | None, folder: Path) -> disk_watch.Measure:
    """`measure` in a child process of user `user` (None: this process)."""
    if user is None:
        return disk_watch.measure(folder, 2**30, 10**6)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.setgid(user)
            os.setuid(user)
            found = disk_watch.measure(folder, 2**30, 10**6)
            os.write(write_end, f"{found.bytes} {found.entries}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as answer:
        got = answer.read().split()
    os.waitpid(pid, 0)
    return disk_watch.Measure(int(got[0]), int(got[1]), False, 0.0)


# ----- the floor -----


def test_the_floor_refuses_a_new_sandbox_and_says_why(
    engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _make(engine, "before-1", isolation="none")
    free_mib = shutil.disk_usage(engine.home).free // MIB
    monkeypatch.setenv(MIN_FREE_ENV, str(free_mib + 1024))

    with pytest.raises(ProviderError) as refused:
        _make(engine, "after-1", isolation="none")

    assert refused.value.kind == LOW_DISK and refused.value.retryable
    assert MIN_FREE_ENV in str(refused.value) and "free" in str(refused.value)
    assert not (engine.sandboxes_dir / "after-1").exists()
    # A sandbox made before is still there for its run (a retried create finds it).
    assert engine.get_or_create("before-1")[1] is False


# ----- the settings -----


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({DISK_ENV: "quota"}, DISK_ENV),
        ({"OVERNIGHT_SANDBOX_DISK_MIB": "63"}, "OVERNIGHT_SANDBOX_DISK_MIB"),
        ({"OVERNIGHT_SANDBOX_DISK_MIB": "lots"}, "OVERNIGHT_SANDBOX_DISK_MIB"),
        ({MIN_FREE_ENV: "-1"}, MIN_FREE_ENV),
    ],
)
def test_a_worker_with_a_disk_setting_it_cannot_read_does_not_start(
    tmp_path: Path, settings: dict[str, str], named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        worker_summary(tmp_path, settings)


def test_the_worker_says_at_its_start_what_local_sandboxes_disks_get(tmp_path: Path) -> None:
    said = worker_summary(
        tmp_path, {DISK_ENV: "watch", "OVERNIGHT_SANDBOX_DISK_MIB": "100", MIN_FREE_ENV: "0"}
    )
    assert said == (
        "at most 100 MiB (measured: paused past it) unless a spec says (disk_mib); "
        "no floor of free space"
    )
