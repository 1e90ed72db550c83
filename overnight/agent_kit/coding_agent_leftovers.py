"""The processes a dead coding-agent CLI leaves, found and ended (`end_cli`), for the adapter
(`coding_agent.py`). Standard library only, Python 3.8 or newer, like the kit.

A killed Claude Code leaves its tool's shell running (the tool runs in a session of its own,
so the CLI's process group does not reach it). The adapter is the child subreaper of its
subtree (`become_subreaper`, `PR_SET_CHILD_SUBREAPER`): what a dead CLI leaves is re-parented
to the adapter, not to the sandbox's init, so every leftover is found among the adapter's
descendants in `/proc`, and ended. Only what began after the adapter's first CLI is taken, and
the CLI's zombie is held until its leftovers are ended (its pid, group and session ids then
name it alone, never a later process given the same number): a process that is not the root
the adapter assumes (its code run inside another program) leaves that program's earlier
children, and their exit statuses, alone.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process the child subreaper of its subtree (Linux); True when it is."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgrp, session) of `pid` from /proc, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    try:
        return fields[0], int(fields[1]), int(fields[2]), int(fields[3])
    except (IndexError, ValueError):
        return None


def process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as comm:
            return comm.read().strip()
    except OSError:
        return ""


def _all_pids() -> list[int]:
    try:
        return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []


def started(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot, from /proc), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _started_since(pid: int, since: int | None) -> bool:
    begun = started(pid)
    return since is not None and begun is not None and begun >= since


# When this process's first CLI started: what began since among its descendants is its CLIs'
# (a leftover that forked while an earlier CLI's were ended is found at the next CLI's end).
_first_cli_began: list[int] = []


def exited(pid: int) -> bool:
    """Whether this process's child `pid` has ended, without reaping it: its zombie keeps its
    pid, group and session ids from being given to a later process."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def end_cli(
    process: subprocess.Popen[bytes], keep: Callable[[], set[int]], timeout: float | None = None
) -> list[str]:
    """After the CLI's end (waited for up to `timeout` s, never reaped): end what it left (its
    group and session, and this process's descendants begun since it started, except `keep()`:
    the adapter's own git), its group; say what was ended. The caller then reaps the CLI
    (`process.wait()`)."""
    if timeout is None:
        try:
            os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass
    else:
        deadline = time.monotonic() + timeout
        while not exited(process.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
    begun = started(process.pid)
    if begun is not None and not _first_cli_began:
        _first_cli_began.append(begun)
    since = _first_cli_began[0] if _first_cli_began else None
    running = keep()
    ended = end_processes(
        leftovers(process.pid, running, since), running | {process.pid}, since=since
    )
    if begun is not None:  # still its number: its zombie is held, or it runs
        kill_group(process.pid)
    return ended


def descendants(root: int) -> list[int]:
    """Every live process under `root` (not itself), parents before children."""
    children: dict[int, list[int]] = {}
    for pid in _all_pids():
        stat = _stat(pid)
        if stat is not None:
            children.setdefault(stat[1], []).append(pid)
    found: list[int] = []
    pending = [root]
    while pending:
        for child in children.get(pending.pop(0), []):
            found.append(child)
            pending.append(child)
    return found


def leftovers(cli_pid: int, keep: set[int], since: int | None = None) -> list[int]:
    """The processes a CLI left: this process's descendants begun since `since` (default: the
    CLI's start; re-parented here, the subreaper) and the members of the CLI's process group
    and session, except `keep` and what is under them (the adapter's own git commands).
    Nothing once `cli_pid` is gone (reaped): its number may be another's by then."""
    me = os.getpid()
    begun = started(cli_pid)
    if begun is None:
        return []
    since = begun if since is None else since
    kept: set[int] = set()
    for pid in keep:
        kept.add(pid)
        kept.update(descendants(pid))
    found = [pid for pid in descendants(me) if pid not in kept and _started_since(pid, since)]
    for pid in _all_pids():
        stat = _stat(pid)
        if stat is None or pid in kept or pid == me or pid in found:
            continue
        if stat[2] == cli_pid or stat[3] == cli_pid:
            found.append(pid)
    return [pid for pid in found if _alive(pid)]


def end_processes(
    pids: list[int], keep: set[int], grace: float = 0.0, since: int | None = None
) -> list[str]:
    """SIGKILL `pids` (SIGTERM first when `grace` > 0), reap the zombies among this process's
    children begun since `since` (never one in `keep`: a child a Popen waits for), and say
    what was ended ("sleep (pid 41)")."""
    named = [(pid, process_name(pid)) for pid in pids]
    if grace > 0:
        _signal_all(pids, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
            time.sleep(0.02)
    _signal_all(pids, signal.SIGKILL)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.01)
    reap_children(keep, since)
    return [f"{name or '?'} (pid {pid})" for pid, name in named]


def _signal_all(pids: list[int], number: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, number)
        except (ProcessLookupError, PermissionError):
            pass


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def reap_children(keep: set[int], since: int | None = None) -> None:
    """Reap the zombies among this process's children that no Popen waits for (`keep`): the
    orphans re-parented here that ended. With `since`, only those begun since then (a CLI's
    start): a child the process had before is its owner's to wait for."""
    me = os.getpid()
    for pid in _all_pids():
        if pid in keep or (since is not None and not _started_since(pid, since)):
            continue
        stat = _stat(pid)
        if stat is not None and stat[1] == me and stat[0] == "Z":
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def kill_group(pgid: int, number: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, number)
    except (ProcessLookupError, PermissionError):
        pass
