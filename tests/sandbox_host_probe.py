"""What a local sandbox holds on the host, found from /proc and /sys alone (not through the
engine's own bookkeeping, which the tests check): processes whose command line names the
sandbox's folder, whose working folder is inside it or whose cgroup is the sandbox's, with
every process below them (a launcher's port relay, slirp4netns); mounts under its folder; loop
devices backed by a file in it, unless the only mounts of one are copies in mount namespaces
of other programs (this host's mounts do not propagate: a namespace made while the image was
mounted, e.g. another test's `bwrap --ro-bind / /` or `unshare -m`, keeps its own copy for as
long as it lives, which nothing the sandbox does can end)."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path

MIB = 1024 * 1024


@dataclass(frozen=True)
class Held:
    processes: dict[int, str]  # pid: its command line
    memory_bytes: int
    mounts: list[str]
    loops: list[str]

    @property
    def nothing(self) -> bool:
        return not self.processes and not self.mounts and not self.loops

    def words(self) -> str:
        names = sorted({cmd.split(" ")[0].rsplit("/", 1)[-1] for cmd in self.processes.values()})
        return (
            f"{len(self.processes)} processes ({', '.join(names) or '-'}), "
            f"{self.memory_bytes / MIB:.1f} MiB resident, {len(self.mounts)} mounts, "
            f"{len(self.loops)} loop devices"
        )


def held(folder: Path) -> Held:
    folder = folder.resolve()
    name, where = folder.name, str(folder)
    parents: dict[int, list[int]] = {}
    roots: set[int] = set()
    commands: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            cgroup = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        if stat[0] in ("Z", "X"):
            continue
        parents.setdefault(int(stat[1]), []).append(pid)
        commands[pid] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            cwd = ""
        in_cgroup = any(
            f"/{name}." in line or line.rstrip().endswith(f"/{name}")
            for line in cgroup.splitlines()
        )
        if os.fsencode(where) in cmdline or cwd == where or cwd.startswith(where + "/"):
            roots.add(pid)
        elif in_cgroup:
            roots.add(pid)
    found, todo = set(roots), list(roots)
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    found.discard(os.getpid())
    return Held(
        processes={pid: commands.get(pid, "") for pid in sorted(found)},
        memory_bytes=sum(_rss(pid) for pid in found),
        mounts=_mounts_under(where),
        loops=_loops_in(where, found),
    )


async def wait_nothing_held(folder: Path, timeout: float = 60) -> Held:
    """What the sandbox holds once it holds nothing, or when `timeout` is up (a cap on a
    wait: processes take a moment to go after their sandbox let go)."""
    give_up = time.monotonic() + timeout
    now = held(folder)
    while not now.nothing and time.monotonic() < give_up:
        await asyncio.sleep(0.2)
        now = held(folder)
    return now


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _mounts_under(where: str) -> list[str]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split(" ")[4].replace("\\040", " ")
        if point == where or point.startswith(where + "/"):
            found.append(point)
    return found


def _loops_in(where: str, sandbox_pids: set[int]) -> list[str]:
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            text = backing.read_text().strip()
            device = (backing.parent.parent / "dev").read_text().strip()
        except OSError:
            continue
        if text.startswith(where + "/") and not _only_foreign_copies(device, sandbox_pids):
            found.append(f"{backing.parent.parent.name}: {text}")
    return found


def _only_foreign_copies(device: str, sandbox_pids: set[int]) -> bool:
    """True when `device` (major:minor) is mounted only in mount namespaces other than this
    process's, and by none of the sandbox's processes: copies another program's namespace
    took. A loop device mounted nowhere (attached and forgotten) is the sandbox's."""
    holders: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            lines = Path(f"/proc/{entry}/mountinfo").read_text().splitlines()
        except OSError:
            continue
        if any(line.split(" ")[2] == device for line in lines if line.count(" ") > 2):
            holders.add(int(entry))
    here = Path("/proc/self/mountinfo").read_text().splitlines()
    mounted_here = any(line.split(" ")[2] == device for line in here if line.count(" ") > 2)
    return bool(holders) and not mounted_here and not holders & sandbox_pids
