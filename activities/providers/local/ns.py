"""Signalling every process of an isolated local sandbox: its PID namespace, seen from the host.

An isolated agent runs in a PID namespace of its own (bubblewrap's `--unshare-pid`). Daemons it
starts with `setsid` leave its process group, but never its namespace, so the namespace is
what the end of an agent kills (SIGKILL to the namespace's PID 1, which makes the kernel kill
the rest). Pause and wake act on the sandbox's cgroup (see cgroups); the SIGSTOP and SIGCONT
here are for sandboxes made before cgroups.

It also holds the pipes to an isolated process (`Pipes`): bubblewrap's info (the host pid of
the namespace's PID 1), its block pipe (held while the sandbox's network is plugged in, see
`netns`) and the status the first process inside writes when an agent ends (`inside`).

Standard library only: the launcher loads it by path (it runs with `python -I`).
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Rounds of SIGSTOP before giving up on a namespace that keeps making processes.
STOP_ROUNDS = 20
# How long a round waits for its processes to have taken the SIGSTOP.
STOPPED_WAIT_SECONDS = 5.0
# Stopped, traced, or no longer running at all (zombie, dead; None: gone).
STOPPED_STATES = {"T", "t", "Z", "X", None}
# Placeholders in an agent's argv for the pipes' write ends (numbers known only at launch).
INFO_FD = "@INFO_FD@"
STATUS_FD = "@STATUS_FD@"
BLOCK_FD = "@BLOCK_FD@"
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

    For SIGSTOP it waits until each process has stopped (a signal sent is taken only when its
    process next runs: until then it runs, and may fork), then looks again until a round finds
    no process it had not stopped yet, so one forked meanwhile is stopped too."""
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
        if sig == signal.SIGSTOP:
            _until_stopped(fresh)
        done |= fresh
    return len(done)


def _until_stopped(pids: set[int]) -> None:
    """Wait (capped: a loaded host may take a while to run each one) until every one of
    `pids` is stopped or gone."""
    give_up = time.monotonic() + STOPPED_WAIT_SECONDS
    waiting = set(pids)
    while waiting and time.monotonic() < give_up:
        waiting = {pid for pid in waiting if _process_state(pid) not in STOPPED_STATES}
        if waiting:
            time.sleep(0.005)


def _process_state(pid: int) -> str | None:
    """The one-letter state /proc gives `pid`, or None when it is gone."""
    fields = stat_fields(pid)
    return None if fields is None else fields[0]


def stat_fields(pid: int) -> list[str] | None:
    """`/proc/PID/stat`'s fields after the command name (the state first), or None when the
    process is gone. Split after the last ")": a command name may hold spaces and ")"."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


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
    """The pipes between whoever starts an isolated sandbox process (the launcher, or the
    engine for a command) and its bubblewrap: bwrap's info (the host pid of the namespace's
    PID 1), its block pipe (held until the sandbox's network is up) and the status the first
    process inside writes when an agent ends (`inside`). Nothing at all for a process that is
    not isolated."""

    def __init__(
        self,
        argv: list[str],
        network: dict[str, Any] | None = None,
        start_network: Callable[..., Any] | None = None,
    ) -> None:
        self.used = INFO_FD in argv
        self._info = os.pipe() if self.used else (-1, -1)
        self._status = os.pipe() if STATUS_FD in argv else (-1, -1)
        self._block = os.pipe() if BLOCK_FD in argv else (-1, -1)
        swap = {
            INFO_FD: str(self._info[1]),
            STATUS_FD: str(self._status[1]),
            BLOCK_FD: str(self._block[0]),
        }
        self.argv = [swap.get(arg, arg) for arg in argv] if self.used else argv
        self._plan = network
        self._start_network = start_network
        self.network: Any = None
        # Why the sandbox was killed before it ran (its network could not be made).
        self.failure: str | None = None

    def pass_fds(self) -> tuple[int, ...]:
        return tuple(fd for fd in (self._info[1], self._status[1], self._block[0]) if fd >= 0)

    def started(self) -> dict[str, Any]:
        """After the start: the namespace's PID 1 (`ns_pid`) and the namespace (`pid_ns`),
        once bwrap has said them, with the sandbox's network plugged in before it goes on;
        empty when not isolated or bwrap failed to set up."""
        if not self.used:
            return {}
        # The child's ends: bwrap holds its own copies now.
        for fd in (self._info[1], self._status[1], self._block[0]):
            if fd >= 0:
                os.close(fd)
        self._info, self._status = (self._info[0], -1), (self._status[0], -1)
        self._block = (-1, self._block[1])
        pid = self._child_pid()
        os.close(self._info[0])
        self._info = (-1, -1)
        if pid is None:
            self._release(go=False)
            return {}
        found = {"ns_pid": pid, "pid_ns": namespace_of(pid)}
        if self._plan is not None and self._start_network is not None:
            try:
                self.network = self._start_network(
                    pid,
                    list(self._plan.get("host_ports", [])),
                    self._plan.get("uid"),
                    outbound=self._plan.get("outbound", True),
                )
            except Exception as error:  # no sandbox runs without the network it was promised
                self.failure = f"overnight: the sandbox's network could not be made: {error}"
                kill_namespace(pid, found["pid_ns"])
                self._release(go=False)
                return found
        self._release(go=True)
        return found

    def _child_pid(self) -> int | None:
        text, give_up = b"", time.monotonic() + INFO_WAIT_SECONDS
        while time.monotonic() < give_up:
            ready, _, _ = select.select([self._info[0]], [], [], 0.1)
            chunk = os.read(self._info[0], 4096) if ready else b""
            text += chunk
            try:
                return int(json.loads(text)["child-pid"])
            except (ValueError, KeyError):
                if ready and not chunk:
                    return None  # closed without a word: bwrap failed, its message is logged
        return None

    def _release(self, *, go: bool) -> None:
        """Let the sandbox's first process go on (bwrap's block pipe), or not: a sandbox
        whose network failed has been killed before the pipe closes."""
        if self._block[1] < 0:
            return
        try:
            if go:
                os.write(self._block[1], b"1")
        except BrokenPipeError:
            pass  # bwrap already ended: its own message says why
        os.close(self._block[1])
        self._block = (-1, -1)

    def close(self) -> None:
        """Close every pipe end still open on this side (idempotent: each end once). The
        network is `close_network`'s."""
        for fd in (*self._info, *self._status, *self._block):
            if fd >= 0:
                os.close(fd)
        self._info = self._status = self._block = (-1, -1)

    def close_network(self) -> None:
        if self.network is not None:
            self.network.close()
            self.network = None

    def ending(self, returncode: int) -> tuple[bool, int | None, int | None]:
        """(killed, exit code, signal) of the agent, after its bwrap (or bash) ended."""
        said: dict[str, Any] = {}
        if self._status[0] >= 0:
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
