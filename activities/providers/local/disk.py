"""Freeing a local sandbox's disk: a stopped sandbox is gone, as on Runtime.

A stop (`LocalEngine.stop`, a lease end that stops, `overnight reap`) leaves of the sandbox's
folder only a tombstone: `sandbox.json` (state `stopped`, when its disk was freed and how much
it held), its `.lock`, and each agent's records (`launch.json`, `process.json`, `exit.json`:
what was started, and how it ended; `output.json`: how many bytes it printed). Everything
else (the workspace, the agent's home and `/tmp`, its output) is deleted: nothing the agent
wrote or printed outlives the sandbox, so no secret it printed does either (the run keeps its
last words, redacted by the worker, read before the stop). A paused sandbox keeps everything.

Crash-safe, in two steps under the sandbox's lock, its agents already dead:

1. everything but the tombstone is moved, one `rename` each, into an entry of
   `$OVERNIGHT_HOME/trash/` that the deleting process holds an flock on; the sandbox is then
   marked freed;
2. the entry is deleted.

A process killed during 1 leaves a stopped sandbox not marked freed: the next stop or
`overnight reap` does it again (what was moved is already gone from the folder). Killed during
2, it leaves a trash entry whose flock died with it: `reap` deletes it (an entry still locked
is being deleted by a live process, and is left to it).

Nothing outside the folder is touched: deleting walks by file descriptor (`shutil.rmtree`'s
fd-based walk on Linux, `avoids_symlink_attacks`: a symlink is removed, never followed), and a
worker that is not root, meeting folders the agent made read-only, gives itself write access
to them through no symlink (`O_PATH | O_NOFOLLOW`) before trying again. A worker that is root
deletes files of the sandbox's own user as they are.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import shutil
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from activities.providers.local.files import read_json, write_json
from activities.providers.local.launcher import EXIT_FILE, LAUNCH_FILE, OUTPUT_FILE, PROCESS_FILE
from activities.providers.local.state import SANDBOX_FILE

TRASH = "trash"
# What a stopped sandbox keeps: its state and lock, and per agent its records.
OUTPUT_SIZE_FILE = "output.json"
KEPT_TOP = frozenset({SANDBOX_FILE, ".lock", "processes"})
KEPT_AGENT = frozenset({LAUNCH_FILE, PROCESS_FILE, EXIT_FILE, OUTPUT_SIZE_FILE})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

if not shutil.rmtree.avoids_symlink_attacks:  # pragma: no cover (every Linux has it)
    raise ImportError("deleting sandboxes needs shutil.rmtree's fd-based walk (Linux)")


@contextmanager
def trash_entry(trash: Path, name: str) -> Iterator[Path]:
    """A new, empty entry of the trash, flocked by this process until the block ends (its
    flock dies with the process: a later `empty_trash` then deletes what is left)."""
    trash.mkdir(parents=True, exist_ok=True)
    entry = trash / f"{name}.{time.time_ns():x}{secrets.token_hex(2)}"
    entry.mkdir(mode=0o700)
    fd = os.open(entry, _DIR_FLAGS)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield entry
    finally:
        os.close(fd)


def move_out(folder: Path, entry: Path) -> int:
    """Step 1: move everything a tombstone does not keep into `entry`. The bytes moved out
    (what deleting `entry` frees)."""
    procs = folder / "processes"
    if _is_real_dir(procs):
        for proc_dir in _children(procs):
            if not _is_real_dir(proc_dir):
                _move(proc_dir, entry / "processes" / proc_dir.name)
                continue
            _note_output_size(proc_dir)
            for child in _children(proc_dir):
                if child.name not in KEPT_AGENT:
                    _move(child, entry / "processes" / proc_dir.name / child.name)
    for child in _children(folder):
        if child.name not in KEPT_TOP or (child.name == "processes" and not _is_real_dir(child)):
            _move(child, entry / child.name)
    return tree_bytes(entry)


def output_size(proc_dir: Path) -> int | None:
    """How many bytes a deleted agent's output held (None: not deleted, or not known)."""
    noted = read_json(proc_dir / OUTPUT_SIZE_FILE)
    size = noted.get("bytes") if isinstance(noted, dict) else None
    return size if isinstance(size, int) else None


def _note_output_size(proc_dir: Path) -> None:
    # Its size only, never its bytes: a reader a moment behind is told how much it missed.
    if (proc_dir / OUTPUT_SIZE_FILE).exists():
        return
    try:
        info = os.lstat(proc_dir / OUTPUT_FILE)
    except OSError:
        return
    if stat.S_ISREG(info.st_mode):
        write_json(proc_dir / OUTPUT_SIZE_FILE, {"bytes": info.st_size})


def remove_tree(path: Path) -> None:
    """Delete `path` and everything below it, following no symlink; best effort (what cannot
    be deleted stays for `empty_trash`)."""
    failed: list[str] = []
    shutil.rmtree(path, onerror=lambda _f, where, _e: failed.append(str(where)))
    if failed and os.path.lexists(path) and os.geteuid() != 0:
        # Folders the agent made read-only (Go's module cache does): give them back.
        _loosen(path)
        shutil.rmtree(path, ignore_errors=True)


def empty_trash(trash: Path) -> list[tuple[str, int]]:
    """Delete every trash entry no live process is deleting: (entry, bytes freed) each."""
    done: list[tuple[str, int]] = []
    if not trash.is_dir():
        return done
    for entry in sorted(trash.iterdir()):
        freed = _delete_entry(entry)
        if freed is not None:
            done.append((entry.name, freed))
    return done


def throw_away(path: Path, trash: Path) -> int:
    """Delete a whole folder crash-safely (renamed into the trash first); its bytes."""
    if not os.path.lexists(path):
        return 0
    with trash_entry(trash, path.name) as entry:
        _move(path, entry / path.name)
        size = tree_bytes(entry)
        remove_tree(entry)
    return size


def tree_bytes(path: Path, *, one_filesystem: bool = False) -> int:
    """What `path` holds on disk (allocated blocks, each inode once), through no symlink.
    `one_filesystem`: not what is mounted below it (a sandbox's image is counted as the file
    it is on this filesystem, not again as what it holds)."""
    try:
        top = os.lstat(path)
    except OSError:
        return 0
    total = top.st_blocks * 512
    if not stat.S_ISDIR(top.st_mode):
        return total
    seen: set[tuple[int, int]] = set()
    for _where, dirs, files, dir_fd in os.fwalk(path, follow_symlinks=False):
        for name in dirs + files:
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                continue
            if one_filesystem and info.st_dev != top.st_dev:
                if name in dirs:
                    dirs.remove(name)  # a mount point: not walked
                continue
            key = (info.st_dev, info.st_ino)
            if key not in seen:
                seen.add(key)
                total += info.st_blocks * 512
    return total


def _delete_entry(entry: Path) -> int | None:
    """Delete one trash entry unless another live process holds its flock (None then)."""
    try:
        fd = os.open(entry, _DIR_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno not in (errno.ENOTDIR, errno.ELOOP):
            return None
        size = tree_bytes(entry)  # a stray file or link: removed, never followed
        entry.unlink(missing_ok=True)
        return size
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        size = tree_bytes(entry)
        remove_tree(entry)
        return size
    finally:
        os.close(fd)


def _move(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(source, target)
    except FileNotFoundError:
        return
    except OSError as error:
        if error.errno != errno.EXDEV:
            raise
        # The trash is on another filesystem than the sandbox: delete it where it is.
        if _is_real_dir(source):
            remove_tree(source)
        else:
            source.unlink(missing_ok=True)


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _loosen(root: Path) -> None:
    """Give the owner rwx on `root` and every folder below it, reached through no symlink."""
    _chmod_at(None, str(root))
    for _where, dirs, _files, dir_fd in os.fwalk(root, follow_symlinks=False):
        for name in dirs:
            _chmod_at(dir_fd, name)


def _chmod_at(dir_fd: int | None, name: str) -> None:
    # O_PATH opens even a folder with no permissions; O_NOFOLLOW refuses a symlink. The
    # chmod goes to exactly that folder through its /proc/self/fd entry.
    try:
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=dir_fd)
    except OSError:
        return
    try:
        os.chmod(f"/proc/self/fd/{fd}", 0o700)
    except OSError:
        pass
    finally:
        os.close(fd)
