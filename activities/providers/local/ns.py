"""Signalling every process of an isolated local sandbox: its PID namespace, seen from the host.

An isolated agent runs in a PID namespace of its own (bubblewrap's `--unshare-pid`). Daemons it
starts with `setsid` leave its process group, but never its namespace, so the namespace is
what pause (SIGSTOP), wake (SIGCONT) and stop (SIGKILL to the namespace's PID 1, which makes
the kernel kill the rest) act on.

It also holds the launcher's two pipes to an isolated agent (`Pipes`): bubblewrap's info (the
host pid of the namespace's PID 1) and the status the first process inside writes when the
agent ends (`local_inside`).

Standard library only: the launcher loads it by path (it runs with `python -I`).
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
from typing import Any

# Rounds of SIGSTOP before giving up on a namespace that keeps making processes.
STOP_ROUNDS = 20
# Placeholders in an agent's argv for the pipes' write ends (numbers known only at launch).
INFO_FD = "@INFO_FD@"
STATUS_FD = "@STATUS_FD@"
INFO_WAIT_SECONDS = 10.0


def namespace_of(pid: int) -> int | None:
    """The inode of `pid`'s PID namespace, or None when it is gone or not ours to look at."""
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def members(namespace: int) -> set[int]:
    """Host pids of every process whose PID namespace is `namespace`."""
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit() and namespace_of(int(name)) == namespace:
            found.add(int(name))
    return found


def signal_namespace(namespace: int, sig: signal.Signals) -> int:
    """Send `sig` to every process of the namespace; how many got it.

    For SIGSTOP it looks again until a round finds no process it had not stopped yet, so a
    process forked while the others were being stopped is stopped too (a stopped process
    cannot fork)."""
    done: set[int] = set()
    for _ in range(STOP_ROUNDS if sig == signal.SIGSTOP else 1):
        fresh = members(namespace) - done
        if not fresh:
            break
        for pid in fresh:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        done |= fresh
    return len(done)


def kill_namespace(init_pid: int, namespace: int | None) -> None:
    """SIGKILL the namespace's PID 1 (seen from the host as `init_pid`): the kernel then kills
    every other process in it. Checked against `namespace` so a reused pid is left alone."""
    if namespace is not None and namespace_of(init_pid) != namespace:
        return
    try:
        os.kill(init_pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_recorded(started: dict[str, Any]) -> None:
    """Kill the namespace an agent's `process.json` names, if it names one."""
    if started.get("ns_pid") is not None:
        kill_namespace(int(started["ns_pid"]), started.get("pid_ns"))


class Pipes:
    """The launcher's pipes to an isolated agent; nothing at all for an agent that is not."""

    def __init__(self, argv: list[str]) -> None:
        self.used = INFO_FD in argv
        self._info = os.pipe() if self.used else (-1, -1)
        self._status = os.pipe() if self.used else (-1, -1)
        swap = {INFO_FD: str(self._info[1]), STATUS_FD: str(self._status[1])}
        self.argv = [swap.get(arg, arg) for arg in argv] if self.used else argv

    def pass_fds(self) -> tuple[int, ...]:
        return (self._info[1], self._status[1]) if self.used else ()

    def started(self) -> dict[str, Any]:
        """After the start: the namespace's PID 1 (`ns_pid`) and the namespace (`pid_ns`),
        once bwrap has said them; empty when not isolated or bwrap failed to set up."""
        if not self.used:
            return {}
        os.close(self._info[1])
        os.close(self._status[1])
        text, give_up = b"", time.monotonic() + INFO_WAIT_SECONDS
        while time.monotonic() < give_up:
            ready, _, _ = select.select([self._info[0]], [], [], 0.1)
            chunk = os.read(self._info[0], 4096) if ready else b""
            text += chunk
            try:
                pid = int(json.loads(text)["child-pid"])
            except (ValueError, KeyError):
                if ready and not chunk:
                    break  # closed without a word: bwrap failed, its message is in the log
                continue
            return {"ns_pid": pid, "pid_ns": namespace_of(pid)}
        return {}

    def ending(self, returncode: int) -> tuple[bool, int | None, int | None]:
        """(killed, exit code, signal) of the agent, after its bwrap (or bash) ended."""
        said: dict[str, Any] = {}
        if self.used:
            os.set_blocking(self._status[0], False)
            try:
                said = json.loads(os.read(self._status[0], 4096) or b"{}")
            except (OSError, ValueError):
                said = {}
        if "exit_code" in said:
            return False, int(said["exit_code"]), None
        if "signal" in said:
            return True, None, int(said["signal"])
        if returncode < 0:
            return True, None, -returncode
        if self.used and returncode > 128:
            # Its namespace was killed before the agent could say how it ended.
            return True, None, returncode - 128
        return False, returncode, None
