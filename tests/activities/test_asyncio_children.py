"""The worker's asyncio children keep the exit status they ended with.

Python 3.11's asyncio waits for each child in a thread (`ThreadedChildWatcher`). Killing an
asyncio child polls it first (`subprocess.Popen.send_signal`): one that has just ended is
reaped in the loop's thread, and the watcher's thread then logs "Unknown child process pid N,
will report returncode 255". The gateway killed every `git http-backend` it ran once its
answer was read, that is, as it ended; in a test process that runs a worker this was the
"returncode 255" of full-suite runs.

`LateWatcher` is asyncio's own watcher with its thread late, as on a loaded machine: it lets
the child end, leaves it unreaped for `LATE_SECONDS`, then reaps it as asyncio does and
keeps the status it reported. That makes the race certain instead of one run in many.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from activities.gateway import git_http
from activities.gateway.origin import Origin
from overnight.core.asyncio_children import _kill_by_pid, end_child, kill_child

LATE_SECONDS = 1.0
UNKNOWN_CHILD = "Unknown child process"

pytestmark = pytest.mark.skipif(
    not hasattr(asyncio, "ThreadedChildWatcher"), reason="asyncio's threaded child watcher"
)


class LateWatcher(asyncio.ThreadedChildWatcher):
    """asyncio's threaded watcher, its waiting thread `LATE_SECONDS` behind each child's end;
    `statuses`: pid -> the exit status it reported to the loop."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: dict[int, int] = {}

    def add_child_handler(self, pid: int, callback: Any, *args: Any) -> None:
        def kept(pid: int, returncode: int, *rest: Any) -> None:
            self.statuses[pid] = returncode
            callback(pid, returncode, *rest)

        super().add_child_handler(pid, kept, *args)

    def _do_waitpid(self, loop: Any, expected_pid: int, callback: Any, args: Any) -> None:
        try:  # its end, leaving it unreaped (WNOWAIT), then the loaded machine's delay
            os.waitid(os.P_PID, expected_pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass
        time.sleep(LATE_SECONDS)
        super()._do_waitpid(loop, expected_pid, callback, args)  # type: ignore[misc]


@pytest.fixture
def late_watcher() -> Iterator[LateWatcher]:
    before = asyncio.get_child_watcher()
    watcher = LateWatcher()
    asyncio.set_child_watcher(watcher)
    try:
        yield watcher
    finally:
        asyncio.set_child_watcher(before)


def git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def origin(tmp_path: Path) -> Origin:
    repo = tmp_path / "app"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "README.md").write_text("hello\n")
    git("add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "first", cwd=repo)
    return Origin(path=str(repo), branch="agent/r1", run_id="r1")


@contextlib.asynccontextmanager
async def _serve_git(origin: Origin) -> AsyncIterator[str]:
    """The gateway's git route alone on a loopback port; its URL for the origin."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        method, target, _ = (await reader.readline()).decode().split(" ", 2)
        headers = []
        while (line := (await reader.readline()).decode().strip()) != "":
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
        try:
            await git_http.serve(origin, method, target, headers, reader, writer, "sandbox-1")
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/git/{origin.name}"


async def test_a_git_backend_that_answered_keeps_its_exit_status(
    late_watcher: LateWatcher, origin: Origin, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="asyncio")
    async with _serve_git(origin) as url:
        listed = await asyncio.to_thread(
            subprocess.run, ["git", "ls-remote", url], capture_output=True, text=True
        )
    assert listed.returncode == 0, listed.stderr
    assert "refs/heads/main" in listed.stdout
    # Each backend (git asks info/refs, then ls-refs) ended on its own, with exit 0: none
    # was killed as it ended, none reaped behind asyncio's back (255).
    assert late_watcher.statuses and set(late_watcher.statuses.values()) == {0}
    assert UNKNOWN_CHILD not in caplog.text


async def test_killing_a_child_that_ended_leaves_its_status_to_asyncio(
    late_watcher: LateWatcher, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="asyncio")
    process = await asyncio.create_subprocess_exec("sh", "-c", "exit 3")
    os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped yet
    assert kill_child(process) is False
    assert await process.wait() == 3
    assert UNKNOWN_CHILD not in caplog.text


async def test_a_child_that_still_runs_is_killed_and_its_status_says_so() -> None:
    process = await asyncio.create_subprocess_exec("sleep", "600")
    assert await end_child(process) == -9
    assert kill_child(process) is False  # ended: never signalled again


async def test_without_pidfds_an_ended_child_is_left_to_asyncio_and_a_running_one_killed(
    late_watcher: LateWatcher,
) -> None:
    ended = await asyncio.create_subprocess_exec("sh", "-c", "exit 3")
    os.waitid(os.P_PID, ended.pid, os.WEXITED | os.WNOWAIT)
    assert _kill_by_pid(ended.pid) is False
    assert await ended.wait() == 3
    running = await asyncio.create_subprocess_exec("sleep", "600")
    assert _kill_by_pid(running.pid) is True
    assert await running.wait() == -9
