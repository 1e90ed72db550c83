"""`overnight` commands as a person runs them, each in a process of its own (in a pipe or on a
pseudo-terminal), for tests that run many: `overnight_commands()`.

Each process is forked from one that imported what the console script imports
(tests/cli_fork_server.py), and runs the script's `main()` with its own argv, variables,
folder and stdin/stdout/stderr, so it skips only the imports: about 1.5 s of CPU a command,
most of what a test running 25 of them spent. `OVERNIGHT_FULL_TESTS=1` (tests/full_forms.py)
launches the `overnight` script itself for each command instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.full_forms import FULL

OVERNIGHT = Path(sys.executable).parent / "overnight"
SERVER = Path(__file__).resolve().parent / "cli_fork_server.py"


@dataclass(frozen=True)
class Ran:
    """A command's exit code and what it wrote (on a terminal, all of it in `out`)."""

    code: int
    out: bytes
    err: bytes = b""


class Commands:
    """Runs `overnight ARGS...`; each call may run beside others (each in its own thread)."""

    def __init__(self, channel: socket.socket | None) -> None:
        self._channel = channel  # None: launch the console script itself

    async def in_a_pipe(
        self, *args: str, env: Mapping[str, str] | None = None, timeout: float = 120
    ) -> Ran:
        """As `subprocess.run(capture_output=True)`: stdout and stderr pipes, stdin this
        process's."""
        return await asyncio.to_thread(self._run, args, env, False, timeout)

    async def on_a_terminal(
        self, *args: str, env: Mapping[str, str] | None = None, timeout: float = 120
    ) -> Ran:
        """A pseudo-terminal for its stdin, stdout and stderr: what the terminal received."""
        return await asyncio.to_thread(self._run, args, env, True, timeout)

    def _run(
        self, args: tuple[str, ...], env: Mapping[str, str] | None, terminal: bool, timeout: float
    ) -> Ran:
        deadline = time.monotonic() + timeout
        if terminal:
            leader, follower = pty.openpty()
            targets, readers, ends = {0: follower, 1: follower, 2: follower}, [leader], [follower]
        else:
            out, out_end = os.pipe()
            err, err_end = os.pipe()
            targets, readers, ends = {1: out_end, 2: err_end}, [out, err], [out_end, err_end]
        try:
            pid, wait = self._start([str(OVERNIGHT), *args], dict(env or os.environ), targets)
        except BaseException:
            for fd in readers:
                os.close(fd)
            raise
        finally:
            for fd in ends:
                os.close(fd)
        try:
            received = _read_all(readers, deadline)
        except TimeoutError:
            os.kill(pid, 9)
            raise AssertionError(f"overnight {' '.join(args)}: not ended in {timeout} s") from None
        code = wait(max(1.0, deadline - time.monotonic()))
        return Ran(code, received[0], b"") if terminal else Ran(code, *received)

    def _start(
        self, argv: list[str], env: dict[str, str], targets: dict[int, int]
    ) -> tuple[int, Callable[[float], int]]:
        """Start the command; its pid and a wait for its exit code."""
        if self._channel is None:
            process = subprocess.Popen(
                argv, stdin=targets.get(0), stdout=targets[1], stderr=targets[2], env=env
            )
            return process.pid, lambda timeout: process.wait(timeout)
        status, status_end = os.pipe()
        request = {"argv": argv, "env": env, "cwd": os.getcwd(), "targets": list(targets)}
        try:
            socket.send_fds(
                self._channel, [json.dumps(request).encode()], [*targets.values(), status_end]
            )
        finally:
            os.close(status_end)
        said = os.fdopen(status, "rb")

        def line() -> int:
            text = said.readline().decode()
            if not text.endswith("\n"):
                said.close()
                raise AssertionError("the fork server ended without saying how a command went")
            return int(text)

        def code(_: float) -> int:
            with said:
                return line()

        return line(), code


def _read_all(fds: list[int], deadline: float) -> list[bytes]:
    """Everything read from each of `fds` until its end (a terminal's end is EIO once every
    holder of its other side closed it); each is closed after."""
    received = {fd: bytearray() for fd in fds}
    with selectors.DefaultSelector() as selector:
        for fd in fds:
            selector.register(fd, selectors.EVENT_READ)
        try:
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                for key, _ in selector.select(left):
                    try:
                        chunk = os.read(key.fd, 65536)
                    except OSError:
                        chunk = b""
                    if chunk:
                        received[key.fd] += chunk
                    else:
                        selector.unregister(key.fd)
        finally:
            for fd in fds:
                os.close(fd)
    return [bytes(received[fd]) for fd in fds]


@asynccontextmanager
async def overnight_commands() -> AsyncIterator[Commands]:
    """`Commands` for the block, and its fork server (started here: its imports can overlap
    what the test does first)."""
    if FULL:
        yield Commands(None)
        return
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server = subprocess.Popen(
        [sys.executable, str(SERVER), str(OVERNIGHT), str(theirs.fileno())],
        pass_fds=(theirs.fileno(),),
    )
    theirs.close()
    try:
        yield Commands(ours)
    finally:
        ours.close()  # the server's next read ends it
        try:
            await asyncio.to_thread(server.wait, 30)
        except subprocess.TimeoutExpired:
            server.kill()
