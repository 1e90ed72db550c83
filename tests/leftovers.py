"""What a test process leaves running when it ends, and which test started it.

A test that starts a run, a worker, a dev server or a sandbox must end it: a sandbox's
agent outlives its worker and its dev server (its launcher is detached, by design), so a
leak runs on, unseen, until someone finds it with `ps` an hour later. At the end of each
test process (`tests/conftest.py`) every process that belongs to the session is looked for:

- any whose command line names a path under the session's temporary folder (launchers,
  bubblewrap, dev servers and workers on the session's folders), with every process below
  it (an agent inside bubblewrap is a child of it, seen from here);
- any in the cgroups of a sandbox under that folder (a daemon that left its launcher).

Each is put to the test that was running when it started (`Timeline`); the session then
fails, naming them, after they are killed.
"""

from __future__ import annotations

import bisect
import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from activities.providers.local import cgroups

# Homes sit a few folders down the session's temporary folder (tmp_path / "home", ...).
SANDBOX_DEPTHS = range(1, 6)
# A process may be on its way out when the session ends (a dev server told to stop).
EXIT_GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class Process:
    pid: int
    parent: int
    started: float  # seconds since boot (CLOCK_BOOTTIME, the clock of /proc/<pid>/stat)
    command: str


@dataclass
class Timeline:
    """When each test of this process began, in order: a process is the doing of the test
    that was running when it started (tests of one process run one after another)."""

    starts: list[float] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)

    def began(self, test: str, at: float | None = None) -> None:
        self.starts.append(since_boot() if at is None else at)
        self.tests.append(test)

    def test_at(self, when: float) -> str:
        index = bisect.bisect_right(self.starts, when) - 1
        return self.tests[index] if index >= 0 else "(before the first test)"


def since_boot() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def processes() -> dict[int, Process]:
    """Every process of this machine that can be read now."""
    ticks = os.sysconf("SC_CLK_TCK")
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # it ended while we looked
        # The command's name may hold spaces and parentheses: the fields follow the last ")".
        fields = stat[stat.rindex(")") + 2 :].split()
        command = argv.replace(b"\0", b" ").decode(errors="replace").strip()
        found[int(entry.name)] = Process(
            pid=int(entry.name),
            parent=int(fields[1]),
            started=int(fields[19]) / ticks,
            command=command or stat[stat.index("(") + 1 : stat.rindex(")")],
        )
    return found


def sandbox_cgroups(root: Path) -> list[str]:
    """The cgroup folders of every local sandbox under `root` that still exist."""
    found = []
    for depth in SANDBOX_DEPTHS:
        for path in root.glob("/".join(["*"] * depth) + "/sandboxes/*/sandbox.json"):
            try:
                meta = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            found += [folder for folder in meta.get("cgroups") or {} if Path(folder).is_dir()]
    return found


def left_under(root: Path) -> list[Process]:
    """The processes of the session under `root` that are alive, this one's ancestors aside."""
    table = processes()
    mine = _ancestors(os.getpid(), table)
    inside = f"{root}/"  # not a sibling session's folder (pytest-1 is a prefix of pytest-10)
    marked = {pid for pid, p in table.items() if inside in p.command}
    for folder in sandbox_cgroups(root):
        marked |= cgroups.members(folder, below=True)
    children: dict[int, list[int]] = {}
    for p in table.values():
        children.setdefault(p.parent, []).append(p.pid)
    found: set[int] = set()
    todo = [pid for pid in marked if pid in table]
    while todo:
        pid = todo.pop()
        if pid in found or pid in mine:
            continue
        found.add(pid)
        todo += children.get(pid, [])
    return sorted((table[pid] for pid in found), key=lambda p: (p.started, p.pid))


def _ancestors(pid: int, table: dict[int, Process]) -> set[int]:
    seen = set()
    while pid in table and pid not in seen:
        seen.add(pid)
        pid = table[pid].parent
    return seen


def still_left(root: Path, grace: float = EXIT_GRACE_SECONDS) -> list[Process]:
    """`left_under`, after waiting up to `grace` seconds for them to end on their own."""
    give_up = time.monotonic() + grace
    while True:
        left = left_under(root)
        if not left or time.monotonic() >= give_up:
            return left
        time.sleep(0.2)


def kill(left: list[Process]) -> None:
    for p in left:
        try:
            os.kill(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def report(left: list[Process], timeline: Timeline) -> str:
    """One line per process, under the test that started it."""
    # A process is its tree's: an agent forked after its test returned is still that test's.
    among = {p.pid: p for p in left}

    def top(p: Process) -> Process:
        seen = {p.pid}
        while p.parent in among and p.parent not in seen:
            p = among[p.parent]
            seen.add(p.pid)
        return p

    by_test: dict[str, list[Process]] = {}
    for p in left:
        by_test.setdefault(timeline.test_at(top(p).started), []).append(p)
    lines = [f"{len(left)} process(es) of this test session still ran at its end (now killed):"]
    for test, found in by_test.items():
        lines.append(f"  {test}:")
        lines += [f"    pid {p.pid}: {p.command[:200]}" for p in found]
    return "\n".join(lines)
