"""What a local sandbox holds on its host beside its files: processes and mounts.

A running sandbox holds its agents (each watched by a launcher outside its cgroup, with the
network helpers it started: the port relay, slirp4netns), the commands it runs, and its disk
image's loop mount. A paused one needs none of that unless an agent is alive in it, frozen,
for its run to wake (waiting for an answer, out of budget, a `wait_until`): then its launcher
keeps watching it and its image stays mounted. A paused sandbox with no live agent, or one
kept after its run ended (no run wakes it), lets go of all of it (the engine's `let_go`); a
read or a wake mounts its image again when it needs it.

This module finds what is held (for `overnight disk`, the engine's decisions and the tests'
own checks): its live launchers (one outlives its agent by a moment) and everything they
started, the members of the sandbox's cgroups, the mounts under its folder and the loop devices
its image backs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from activities.providers.local import cgroups as local_cgroups
from activities.providers.local import disk_image, launcher
from activities.providers.local.files import read_json
from activities.providers.local.procs import all_records
from activities.providers.local.state import SandboxMeta


@dataclass(frozen=True)
class HostHolds:
    """What one sandbox holds on its host now."""

    pids: tuple[int, ...]  # its launchers, their helpers, and every process in its cgroups
    memory_bytes: int  # their resident memory, summed
    mounts: int  # mount points under its folder (its image and the folders bound from it)
    # Loop devices its image backs, but for copies in other programs' mount namespaces: one
    # stays attached after the unmount until its last user closes it.
    loops: int = 0

    @property
    def nothing(self) -> bool:
        return not self.pids and not self.mounts and not self.loops


def agents_alive(meta: SandboxMeta, procs_dir: Path) -> bool:
    """Whether any process of the sandbox may still run: an agent whose launcher has not
    written how it ended, or anything in its cgroups (a command, a daemon)."""
    try:
        records = all_records(procs_dir)
    except FileNotFoundError:
        records = []
    if any(record.state == "running" for record in records):
        return True
    return not all(local_cgroups.empty(path) for path in _cgroup_dirs(meta))


def holds(meta: SandboxMeta, folder: Path) -> HostHolds:
    """The host processes and mounts the sandbox in `folder` holds now."""
    pids = launchers(folder / "processes")
    for path in _cgroup_dirs(meta):
        if Path(path).is_dir():
            pids |= local_cgroups.members(path, below=meta.freezer != local_cgroups.CGROUP1)
    pids |= descendants(pids)
    loops = disk_image.loops_of(folder)
    return HostHolds(
        pids=tuple(sorted(pids)),
        memory_bytes=sum(resident_bytes(pid) for pid in pids),
        mounts=len(disk_image.mounts_under(folder)),
        loops=len(set(loops) - set(disk_image.foreign_copies(loops))) if loops else 0,
    )


def launchers(procs_dir: Path) -> set[int]:
    """The live launchers of the sandbox's agents, ended or not: one lives on a moment after it
    wrote how its agent ended (it ends its network helpers, then itself)."""
    pids: set[int] = set()
    for proc_dir in _proc_dirs(procs_dir):
        # Its pid is in its exit record too: one whose agent could not start wrote no other.
        for name in (launcher.PROCESS_FILE, launcher.EXIT_FILE):
            pid = (read_json(proc_dir / name) or {}).get("launcher_pid")
            if isinstance(pid, int) and _is_launcher(pid, proc_dir):
                pids.add(pid)
    return pids


def descendants(roots: set[int]) -> set[int]:
    """Every live process below `roots` (children of children), from /proc's parent links."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(parent, []).append(int(entry))
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found and child not in roots:
                found.add(child)
                todo.append(child)
    return found


def resident_bytes(pid: int) -> int:
    """A process's resident memory (VmRSS), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _is_launcher(pid: int, proc_dir: Path) -> bool:
    """`pid` is the live launcher of `proc_dir` (a reused pid is someone else's; one that
    ended, waiting to be reaped, holds nothing)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return os.fsencode(proc_dir) in cmdline and state not in ("Z", "X")


def _proc_dirs(procs_dir: Path) -> list[Path]:
    try:
        return [entry for entry in procs_dir.iterdir() if entry.is_dir()]
    except OSError:
        return []


def _cgroup_dirs(meta: SandboxMeta) -> list[str]:
    dirs = list(meta.cgroups)
    if meta.cgroup is not None and meta.cgroup not in dirs:
        dirs.append(meta.cgroup)
    return dirs
