"""Freeing a local sandbox's disk is crash-safe and safe: what a stop cut short leaves, the next
`reap` (`LocalDiskAccount.finish_deletes`) finishes; a delete in progress elsewhere is left to
it; a worker that is not root deletes what the agent made read-only; and `overnight disk`'s
figures add up. (A worker SIGKILLed mid-delete, end to end: tests/e2e/test_retention.py.)"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from activities.providers.local import disk as local_disk
from activities.providers.local.disk_account import LocalDiskAccount
from activities.providers.local.engine import LocalEngine
from activities.providers.local.forensics import LocalForensics
from activities.providers.local.snapshots import LocalSnapshots
from overnight.core.constants import LABEL_ATTEMPT, LABEL_RUN
from tests.waits import CAP

MIB = 1024 * 1024
REPO = Path(__file__).resolve().parents[2]
NOW = datetime.now(UTC)


def _sandbox(engine: LocalEngine, name: str, size: int = 2 * MIB) -> Path:
    engine.get_or_create(name, labels={LABEL_RUN: "disk", LABEL_ATTEMPT: "1"}, isolation="none")
    workspace = engine.folder(name) / "workspace"
    (workspace / "app").mkdir()
    (workspace / "app" / "blob").write_bytes(os.urandom(size))
    return workspace


async def test_a_stop_cut_short_before_the_disk_was_freed_is_finished_by_the_next_reap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = LocalEngine(tmp_path / "home")
    workspace = _sandbox(engine, "cut-1")
    moved = local_disk.move_out

    def dies_half_way(folder: Path, entry: Path) -> int:
        local_disk._move(folder / "home", entry / "home")  # one rename done, then the crash
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(local_disk, "move_out", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        engine.stop("cut-1")
    monkeypatch.setattr(local_disk, "move_out", moved)
    assert engine.get("cut-1").state == "stopped" and engine.get("cut-1").freed_at is None
    assert workspace.exists()

    done = await LocalDiskAccount(engine).finish_deletes(NOW)

    assert {(d.kind, d.what) for d in done} >= {("sandbox", "cut-1")}
    freed = sum(d.freed_bytes for d in done)
    assert freed >= 2 * MIB
    assert not workspace.exists() and engine.get("cut-1").freed_at is not None
    assert list(engine.trash_dir.iterdir()) == []
    assert await LocalDiskAccount(engine).finish_deletes(NOW) == []  # nothing left to do


async def test_a_delete_another_live_process_is_doing_is_left_to_it(tmp_path: Path) -> None:
    trash = tmp_path / "trash"
    with local_disk.trash_entry(trash, "busy") as entry:
        (entry / "file").write_bytes(b"x" * 10_000)
        assert local_disk.empty_trash(trash) == []  # its flock is held: not ours to delete
        assert (entry / "file").exists()
    # Its deleter is gone (as a killed worker's flock dies with it): now reap deletes it.
    [(name, freed)] = local_disk.empty_trash(trash)
    assert name == entry.name and freed >= 10_000
    assert list(trash.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root")
def test_a_worker_that_is_not_root_deletes_folders_its_agent_made_read_only() -> None:
    # As an unprivileged user (as a worker that is not root runs, and its agents as itself):
    # folders without write or even read permission, as Go's module cache leaves them, and a
    # link out of the tree to a folder the user may change.
    with tempfile.TemporaryDirectory(dir="/tmp") as scratch:
        os.chmod(scratch, 0o711)  # the test's own temporary folders are root's alone
        base = Path(scratch) / "unprivileged"
        base.mkdir()
        os.chown(base, 65534, 65534)
        _remove_as_nobody(base, _readable_copy(Path(scratch) / "lib"))


def _readable_copy(lib: Path) -> Path:
    """The modules the unprivileged user's Python imports, copied where it may read them: a
    checkout (and its .venv) in a private folder, as `mktemp -d` makes one, is root's alone."""
    listed = subprocess.run(
        [sys.executable, "-c", _IMPORTED],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=REPO,
    )
    for line in listed.stdout.splitlines():
        name, path = line.split("\t")
        source = Path(path)
        if source.name == "__init__.py":
            shutil.copytree(source.parent, lib / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            lib.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, lib / source.name)
    for folder, _, files in os.walk(lib):
        os.chmod(folder, 0o755)
        for file in files:
            os.chmod(Path(folder) / file, 0o644)
    return lib


# The top-level modules (not the standard library's) that importing `disk` brings in.
_IMPORTED = textwrap.dedent(
    """
    import sys, sysconfig
    from activities.providers.local import disk
    stdlib = sysconfig.get_paths()["stdlib"]
    for name in sorted({name.split(".")[0] for name in sys.modules}):
        path = getattr(sys.modules.get(name), "__file__", None) or ""
        if path and (not path.startswith(stdlib) or "site-packages" in path):
            if not name.startswith(("__editable__", "_distutils_hack")) and name != "__main__":
                print(f"{name}\t{path}")
    """
)


def _remove_as_nobody(base: Path, lib: Path) -> None:
    script = textwrap.dedent(
        """
        import os, sys
        from pathlib import Path
        from activities.providers.local import disk
        base = Path(sys.argv[1])
        outside = base / "outside"
        (outside / "inner").mkdir(parents=True)
        outside.chmod(0o500)
        tree = base / "tree"
        (tree / "mod" / "pkg" / "deep").mkdir(parents=True)
        (tree / "mod" / "pkg" / "deep" / "f.go").write_text("package x")
        (tree / "mod" / "link").symlink_to(outside)
        (tree / "mod" / "pkg" / "deep").chmod(0o500)
        (tree / "mod" / "pkg").chmod(0o000)
        (tree / "mod").chmod(0o555)
        disk.remove_tree(tree)
        print(tree.exists(), oct(outside.stat().st_mode & 0o777))
        """
    )
    # The interpreter itself, not the venv's link to it (the venv may be as private), with
    # the copied modules only: nothing from the checkout or the venv is read.
    python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        + [python, "-s", "-c", script, str(base)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=lib,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(lib)},
    )
    assert done.returncode == 0, done.stderr
    # Gone, and the folder the link led to not loosened (still r-x only).
    assert done.stdout.split() == ["False", "0o500"]


async def test_disk_usage_says_what_sandboxes_snapshots_and_half_deletes_hold(
    tmp_path: Path,
) -> None:
    engine = LocalEngine(tmp_path / "home")
    _sandbox(engine, "use-1", 3 * MIB)
    _sandbox(engine, "use-2", 1 * MIB)
    engine.pause("use-1")
    snapshots = LocalSnapshots(engine)
    snapshots.take("use-1", name="s", mode="disk", labels={LABEL_RUN: "disk"}, retention_days=1)
    engine.stop("use-2")
    with local_disk.trash_entry(engine.trash_dir, "left") as entry:
        (entry / "half").write_bytes(os.urandom(MIB))

    usage = await LocalDiskAccount(engine).usage()

    by_id = {s.sandbox_id: s for s in usage.sandboxes}
    assert 3 * MIB <= by_id["use-1"].size_bytes < 4 * MIB and by_id["use-1"].state == "paused"
    assert by_id["use-2"].deleted_at is not None and by_id["use-2"].size_bytes < 64 * 1024
    assert (by_id["use-2"].freed_bytes or 0) >= MIB
    [snap] = usage.snapshots
    assert 3 * MIB <= snap.size_bytes < 4 * MIB and snap.labels == {LABEL_RUN: "disk"}
    assert MIB <= usage.trash_bytes < 2 * MIB
    assert 0 < usage.free_bytes <= usage.total_bytes
    # A snapshot deleted goes through the trash too: nothing left behind.
    snapshots.delete(snap.snapshot_id)
    assert not (engine.home / "snapshots" / snap.snapshot_id).exists()
    assert [e.name for e in engine.trash_dir.iterdir()] == [entry.name]


async def test_a_stopped_sandbox_keeps_nothing_its_agent_printed_not_even_a_secret(
    tmp_path: Path,
) -> None:
    engine = LocalEngine(tmp_path / "home")
    engine.get_or_create("said-1", labels={LABEL_RUN: "disk"}, isolation="none")
    secret = "s3cr3t-" + os.urandom(8).hex()
    engine.start_process(
        "said-1", "said-1-1-0", "echo token=$TOKEN; sleep 60", env={"TOKEN": secret}
    )
    look = LocalForensics(engine)
    give_up = time.monotonic() + CAP  # a time cap, not a count of looks: load slows the start
    while time.monotonic() < give_up:
        if (await look.read_output("said-1", "said-1-1-0", 0)).data:
            break
        await asyncio.sleep(0.05)
    assert (await look.read_output("said-1", "said-1-1-0", 0)).data == f"token={secret}\n".encode()

    engine.stop("said-1")

    # Its agent is still told of (started, killed), its output gone, wherever one looks.
    [agent] = await look.agents("said-1")
    assert (agent.process_id, agent.state) == ("said-1-1-0", "killed")
    chunk = await look.output_tail("said-1", "said-1-1-0", 1000)
    assert (chunk.data, chunk.state) == (b"", "killed")
    for path in (tmp_path / "home").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


async def test_a_reader_a_moment_behind_the_stop_is_told_how_much_it_missed(
    tmp_path: Path,
) -> None:
    engine = LocalEngine(tmp_path / "home")
    engine.get_or_create("late-1", labels={LABEL_RUN: "disk"}, isolation="none")
    engine.start_process("late-1", "late-1-1-0", "seq 1000; sleep 60")
    look = LocalForensics(engine)
    give_up = time.monotonic() + CAP  # a time cap, not a count of looks: load slows the start
    while time.monotonic() < give_up:
        if (await look.read_output("late-1", "late-1-1-0", 0)).data.endswith(b"1000\n"):
            break
        await asyncio.sleep(0.05)
    printed = len(b"".join(f"{n}\n".encode() for n in range(1, 1001)))

    engine.stop("late-1")

    # A follower (`logs --follow`) that had read 100 bytes when the run ended and deleted it.
    late = await look.read_output("late-1", "late-1-1-0", 100)
    assert (late.data, late.dropped, late.next_cursor) == (b"", printed - 100, printed)
    assert late.state == "killed"
    done = await look.read_output("late-1", "late-1-1-0", printed)
    assert (done.data, done.dropped, done.state) == (b"", 0, "killed")


async def test_the_record_of_a_sandbox_deleted_over_30_days_ago_is_forgotten(
    tmp_path: Path,
) -> None:
    engine = LocalEngine(tmp_path / "home")
    for name in ("gone-1", "gone-2"):
        _sandbox(engine, name, 1024)
        engine.stop(name)
    account = LocalDiskAccount(engine)
    stopped = datetime.now(UTC)  # not the module's NOW: the suite may have run long since

    assert await account.finish_deletes(stopped + timedelta(days=29)) == []
    [forgotten] = await account.finish_deletes(stopped + timedelta(days=30, minutes=1))

    assert (forgotten.kind, forgotten.what) == ("records", "2 deleted sandboxes")
    assert 0 < forgotten.freed_bytes < 200_000
    assert engine.find("gone-1") is None and not engine.folder("gone-2").exists()
    assert list(engine.trash_dir.iterdir()) == []
