"""What folders hold on disk, walked by file descriptor and stopped at the first limit passed:
the measure of a sandbox no image holds (disk_watch), and of a run's store (run_store).

The walk follows no link, stays on each folder's own filesystem (something mounted below is
not the sandbox's), counts each inode's blocks once, and stops as soon as the bytes or the
files and folders pass their limit, so it costs at most a walk of the limit's worth of
entries (about 0.2 s per 100,000 here).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Measure:
    bytes: int
    entries: int
    # Stopped early: a limit was passed (the figures are what was counted by then).
    over: bool
    seconds: float


def measure_roots(roots: Sequence[Path], limit_bytes: int, limit_entries: int) -> Measure:
    """What the folders `roots` hold together, up to the first limit passed (a missing one
    holds nothing)."""
    began = time.perf_counter()
    total = entries = 0
    seen: set[tuple[int, int]] = set()
    for top in roots:
        try:
            device = os.lstat(top).st_dev
        except OSError:
            continue
        _readable(None, str(top))
        for _where, dirs, files, dir_fd in os.fwalk(top, follow_symlinks=False):
            for entry in dirs + files:
                try:
                    info = os.stat(entry, dir_fd=dir_fd, follow_symlinks=False)
                except OSError:
                    continue
                if info.st_dev != device:
                    if entry in dirs:
                        dirs.remove(entry)  # something mounted there: not the sandbox's
                    continue
                if stat.S_ISDIR(info.st_mode) and info.st_mode & 0o500 != 0o500:
                    _readable(dir_fd, entry)
                entries += 1
                if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
                    if (device, info.st_ino) in seen:
                        continue
                    seen.add((device, info.st_ino))
                total += info.st_blocks * 512
                if total > limit_bytes or entries > limit_entries:
                    return Measure(total, entries, True, time.perf_counter() - began)
    return Measure(total, entries, False, time.perf_counter() - began)


def _readable(dir_fd: int | None, name: str) -> None:
    """A folder its owner may not read or enter made readable to it again (u+rx), so what it
    holds is measured: a worker that is not root is the agent's own user, and without it a
    `chmod 000` would hide any amount from the measure. Reached through no link (`O_PATH |
    O_NOFOLLOW`); a root worker reads it anyway and changes nothing."""
    if os.geteuid() == 0:
        return
    try:
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=dir_fd)
    except OSError:
        return
    try:
        mode = os.stat(fd).st_mode
        if mode & 0o500 != 0o500:
            os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(mode) | 0o500)
    except OSError:
        pass
    finally:
        os.close(fd)
