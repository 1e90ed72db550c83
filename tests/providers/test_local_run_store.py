"""A run's store on the worker (a coding agent's session store, bound writable at
`/overnight/session`) is inside the sandbox's disk limit, outlives the sandbox, and is freed.

The attack of issue 47, in a real bubblewrap sandbox with `disk_mib` 64: 200 MiB and 20,000
files written into the store. With an image (a root worker that may loop-mount) the store is
an ext4 image of its own, carved out of the 64 MiB: the writes fail inside (`ENOSPC`), and the
sandbox and its store together take at most the limit on the host. Without one, the worker
measures the store with the sandbox and pauses it past the limit. The store survives its
sandbox (a new one of the run finds the session), is mounted again after a reboot, never
binds the host folder beneath an image that is not mounted, and is freed whole.
(The same attack by a coding agent through a real run: tests/e2e/test_run_store_limit.py.)
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.providers.local import disk_image, disk_watch, run_store
from activities.providers.local.disk import TRASH, tree_bytes
from activities.providers.local.disk_limit import DISK_ENV
from activities.providers.local.engine import LocalEngine
from activities.providers.protocol import WorkerMount
from overnight.core.constants import DISK_LIMIT_PREFIX, LABEL_RUN

MIB = 1024 * 1024
LIMIT_MIB = 64
SESSION = "/overnight/session"
# What the worker's own files beside the images may hold, on top of the limit.
SLACK = 16 * MIB
WRITE_200M = (
    "fallocate -l 200M /overnight/session/big; echo fallocate=$?; "
    "dd if=/dev/zero of=/overnight/session/dd bs=1M count=200 2>&1 | tail -1; "
    "echo dd=${PIPESTATUS[0]}"
)
FILES_20000 = (
    'python3 -c "import os\nn=0\ntry:\n    for i in range(20000):\n'
    "        open(f'/overnight/session/f{i}', 'w').close(); n+=1\n"
    "except OSError as e:\n    print('stopped', n, e)\nprint('made', n)\""
)
bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
needs_images = pytest.mark.skipif(
    disk_image.unavailable(Path("/tmp")) is not None,
    reason=f"no loop-mounted images here: {disk_image.unavailable(Path('/tmp'))}",
)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[LocalEngine]:
    engine = LocalEngine(tmp_path / "home")
    try:
        yield engine
    finally:
        for meta in engine.list_sandboxes():
            engine.stop(meta.id)
        disk_image.detach(tmp_path)


def _store(engine: LocalEngine, run: str) -> Path:
    return engine.home / "sessions" / run


def _make(engine: LocalEngine, name: str, run: str) -> None:
    mount = WorkerMount(source=str(_store(engine, run)), target=SESSION, writable=True)
    engine.get_or_create(name, labels={LABEL_RUN: run}, disk_mib=LIMIT_MIB, mounts=(mount,))


def _made(out: str) -> int:
    return int(out.split("made ")[1].split()[0])


# ----- with an image: the kernel holds the limit -----


@bwrap
@needs_images
def test_an_agent_cannot_write_200m_or_20000_files_into_its_session_store(
    engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DISK_ENV, "image")
    engine.home.mkdir(parents=True)
    before = tree_bytes(engine.home, one_filesystem=True)
    _make(engine, "store-1", "store")
    share = run_store.share_mib(LIMIT_MIB)
    assert share == 16
    assert "16 MiB of it for /overnight/session" in _isolation(engine, "store-1")

    wrote = engine.run("store-1", WRITE_200M)
    engine.run("store-1", f"rm -f {SESSION}/big {SESSION}/dd")  # room: the files meet the inodes
    files = engine.run("store-1", FILES_20000)
    # The sandbox's own files fill the rest of the limit (real blocks, not a fallocate's).
    engine.run("store-1", "dd if=/dev/zero of=/workspace/fill bs=1M count=200 2>/dev/null")

    out = wrote.stdout + wrote.stderr
    assert "No space left on device" in out and "fallocate=1" in out, out
    assert "dd=1" in out, out
    assert "No space left on device" in files.stdout, files
    assert 500 < _made(files.stdout) < 1_024  # one file or folder per 16 KiB of its 16 MiB
    held = tree_bytes(engine.home, one_filesystem=True) - before
    assert held <= LIMIT_MIB * MIB + SLACK, held


@bwrap
@needs_images
def test_the_store_outlives_its_sandbox_and_is_freed_whole(
    engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DISK_ENV, "image")
    _make(engine, "keep-1", "keep")
    engine.run("keep-1", f"echo transcript > {SESSION}/s.jsonl && mkdir {SESSION}/d")
    engine.stop("keep-1")  # the sandbox is gone, its image with it

    _make(engine, "keep-2", "keep")
    again = engine.run("keep-2", f"cat {SESSION}/s.jsonl")
    assert again.stdout == "transcript\n", again
    store = _store(engine, "keep")
    assert disk_image.mounts_under(store) == [store / disk_image.MOUNT_DIR]

    engine.stop("keep-2")
    freed = run_store.free(store, engine.home / TRASH)

    assert freed > 0
    assert not store.exists() and disk_image.mounts_under(engine.home / "sessions") == []
    assert list((engine.home / "sessions").iterdir()) == []
    assert run_store.free(store, engine.home / TRASH) == 0  # done already


@bwrap
@needs_images
def test_a_store_image_not_mounted_is_mounted_again_never_the_host_folder_beneath(
    engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DISK_ENV, "image")
    _make(engine, "boot-1", "boot")
    engine.run("boot-1", f"echo before > {SESSION}/s")
    store = _store(engine, "boot")
    disk_image.detach(store)  # a reboot: nothing mounted

    after = engine.run("boot-1", f"cat {SESSION}/s && echo more >> {SESSION}/s")

    assert after.stdout == "before\n", after
    assert os.path.ismount(store / disk_image.MOUNT_DIR)
    # Freed under a running sandbox (its run ended): the store is left out, not the host's.
    run_store.free(store, engine.home / TRASH)
    gone = engine.run("boot-1", f"echo x > {SESSION}/s 2>&1; echo code=$?")
    assert "code=1" in gone.stdout and not store.exists(), gone


# ----- without an image: measured with the sandbox -----


@bwrap
def test_without_an_image_the_store_is_measured_with_its_sandbox_and_emptied_past_its_share(
    engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DISK_ENV, "watch")
    _make(engine, "watched-1", "watched")
    assert "/overnight/session measured with it" in _isolation(engine, "watched-1")
    engine.run("watched-1", f"fallocate -l 100M {SESSION}/big")
    watch = disk_watch.DiskWatch(engine)

    assert watch.check("watched-1") is False  # past the limit: paused, no more measures

    meta = engine.get("watched-1")
    assert meta.state == "paused" and (meta.pause_reason or "").startswith(DISK_LIMIT_PREFIX)
    engine.stop("watched-1")
    # The next sandbox of the run does not start over its limit: the store is emptied.
    _make(engine, "watched-2", "watched")
    listing = engine.run("watched-2", f"ls -A {SESSION} | wc -l")
    assert listing.stdout.strip() == "0", listing
    assert watch.check("watched-2") is True


def _isolation(engine: LocalEngine, name: str) -> str:
    from activities.providers.local.convert import sandbox_info

    return sandbox_info(engine.get(name)).isolation or ""
