"""Ending a child process asyncio started, without taking its exit status from asyncio.

On Python 3.11 asyncio's child watcher (`ThreadedChildWatcher`) waits for each child in a
thread of its own (`os.waitpid(pid, 0)`). `Process.kill()`, `terminate()` and `send_signal()`
go through `subprocess.Popen.send_signal`, which polls first (`waitpid(pid, WNOHANG)`): a child
that has just ended is reaped there, in the event loop's thread. The watcher's thread then
finds no such child, logs "Unknown child process pid N, will report returncode 255" and
reports 255 for it. A child whose output has just ended (a git backend that answered) is
exactly such a child, and the gateway ended every one of them so.

`kill_child` signals a child only while it still runs, and never reaps it: it looks with
`WNOWAIT` (an ended child is left to the watcher) and signals through a pidfd (the signal
reaches that process, never a later one given its number). The watcher alone waits for it.
"""

from __future__ import annotations

import asyncio
import os
import signal

_LOOK = os.WEXITED | os.WNOHANG | os.WNOWAIT


def kill_child(process: asyncio.subprocess.Process) -> bool:
    """SIGKILL `process` if it still runs; True when it was signalled. Never waits for it."""
    if process.returncode is not None:
        return False
    try:
        pidfd = os.pidfd_open(process.pid)
    except ProcessLookupError:
        return False  # reaped by the watcher: its status is on its way to the loop
    except OSError:  # no pidfds (Linux before 5.3): the same look, then its pid
        return _kill_by_pid(process.pid)
    try:
        try:
            ended = os.waitid(os.P_PIDFD, pidfd, _LOOK)
        except ChildProcessError:
            return False  # the watcher reaped it since
        except OSError:  # Linux 5.3: pidfds, but no waitid on one
            return _kill_by_pid(process.pid)
        if ended is not None:
            return False  # it ended: the watcher reaps it and reports its own status
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(pidfd)


def _kill_by_pid(pid: int) -> bool:
    try:
        if os.waitid(os.P_PID, pid, _LOOK) is not None:
            return False
        os.kill(pid, signal.SIGKILL)  # unreaped a moment ago: its pid is still its own
        return True
    except (ChildProcessError, ProcessLookupError):
        return False


async def end_child(process: asyncio.subprocess.Process) -> int:
    """End `process` (SIGKILL if it still runs) and wait for asyncio's status of it."""
    kill_child(process)
    return await process.wait()
