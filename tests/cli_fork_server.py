"""The server of tests/cli_processes.py: imports what the `overnight` console script imports,
once, then forks each command asked of it into a process of its own, run as the script runs it.

Run as `python tests/cli_fork_server.py OVERNIGHT_SCRIPT CHANNEL_FD`. Each request on the
channel (a SOCK_SEQPACKET socket) is a JSON object (`argv`, `env`, `cwd`, `targets`: the fds
the passed descriptors become, 0-2) with those descriptors and, last, a status pipe's write
end. A keeper process forks the command, writes its pid and then its exit code (as
`subprocess` gives it) on the status pipe, and ends; the command's process holds nothing but
its stdin, stdout and stderr.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn


def main() -> None:
    script, channel_fd = sys.argv[1], int(sys.argv[2])
    # The console script's sys.path: its own folder first (not this file's, tests/, whose
    # `activities` package would shadow overnight's).
    sys.path[0] = os.path.dirname(script)
    sys.argv = [script]
    import overnight.cli.entry  # noqa: F401 (the console script's import)
    import overnight.cli.main  # noqa: F401 (the commands, which entry.main imports next)

    channel = socket.socket(fileno=channel_fd)
    keepers = set()
    while True:
        message, fds, _, _ = socket.recv_fds(channel, 1 << 20, 4)
        if not message:
            break  # the test closed its end
        keeper = os.fork()
        if keeper == 0:
            channel.close()
            _only(keep, json.loads(message), fds)
        keepers.add(keeper)
        for fd in fds:
            os.close(fd)
        keepers -= {pid for pid in list(keepers) if os.waitpid(pid, os.WNOHANG)[0]}
    # Reaped by waiting (not left to the kernel), the commands' CPU time counts as this
    # process's children's, and so as the test's (`time`, `--durations` of CPU).
    for keeper in keepers:
        os.waitpid(keeper, 0)


def keep(request: dict[str, Any], fds: list[int]) -> None:
    """In the keeper: fork the command, say its pid, wait for it, say its exit code."""
    *stdio, status = fds
    pid = os.fork()
    if pid == 0:
        os.close(status)
        _only(command, request, stdio)
    for fd in stdio:
        os.close(fd)  # the command's end of a pipe or terminal is its alone: EOF when it ends
    os.write(status, f"{pid}\n".encode())
    _, how = os.waitpid(pid, 0)
    os.write(status, f"{os.waitstatus_to_exitcode(how)}\n".encode())
    os._exit(0)


def command(request: dict[str, Any], stdio: list[int]) -> None:
    """In the command's process: its stdio, variables, folder and argv, then the console
    script's `main()`, ended as the interpreter ends it."""
    for fd, target in zip(stdio, request["targets"], strict=True):
        os.dup2(fd, target)
    for name in os.listdir("/proc/self/fd"):  # as Popen's close_fds: only 0, 1 and 2 stay
        if int(name) > 2:
            try:
                os.close(int(name))
            except OSError:
                pass  # the listing's own descriptor, closed already
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.argv = list(request["argv"])
    if not sys.stdout.write_through:  # buffered (no -u): as the interpreter sets them up
        for stream, fd in ((sys.stdin, 0), (sys.stdout, 1)):
            stream.reconfigure(line_buffering=os.isatty(fd))  # type: ignore[attr-defined]
    from overnight.cli.entry import main as overnight

    try:
        code = overnight()  # on success it ends the process itself (os._exit)
    except SystemExit as ended:  # argparse's exits
        code = _exit_code(ended.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _only(body: Callable[..., None], *args: Any) -> NoReturn:
    """A forked process runs `body` and ends: never back into the server's loop."""
    try:
        body(*args)
    except BaseException:
        traceback.print_exc()
    os._exit(1)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    main()
