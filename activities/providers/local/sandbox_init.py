"""The first process inside an isolated local sandbox: becomes the sandbox's own user, then
runs the agent (or a command).

`python -I -S sandbox_init.py [--as UID:GID] [--status FD] -- COMMAND`:

- `--as`: a worker running as root starts the sandbox with only the capabilities to change
  user; this drops every group and becomes UID:GID (an unprivileged user of the host) before
  anything of the agent runs, so the agent holds no capability and no root file access.
- `--status`: runs `bash -c COMMAND` and writes one JSON object to the pipe FD when it ends:
  `{"exit_code": N}`, or `{"signal": N}` when a signal killed it. Bubblewrap's own exit
  status cannot tell `exit 137` from a SIGKILL, and overnight reads the two differently (a
  crash, or an agent killed). Without it, the command replaces this process.

Standard library only, and no site packages: it runs inside the sandbox.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def become(uid: int, gid: int) -> None:
    """Drop to `uid`:`gid` for good (no way back to root: checked)."""
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != gid:
        raise SystemExit("overnight: could not become the sandbox's user")
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise SystemExit("overnight: the sandbox's user could become root again")


def main(argv: list[str]) -> int:
    args = argv[1:]
    as_user: tuple[int, int] | None = None
    status_fd: int | None = None
    while args and args[0] != "--":
        if args[0] == "--as" and len(args) > 1:
            uid, gid = args[1].split(":")
            as_user = (int(uid), int(gid))
        elif args[0] == "--status" and len(args) > 1:
            status_fd = int(args[1])
        else:
            raise SystemExit(f"overnight: sandbox_init.py: unexpected {args[0]!r}")
        args = args[2:]
    command = args[1]
    if status_fd is not None:
        os.set_inheritable(status_fd, False)  # the agent's processes must not hold the pipe
    if as_user is not None:
        become(*as_user)
    if status_fd is None:
        os.execvp("bash", ["bash", "-c", command])
    try:
        returncode = subprocess.call(["bash", "-c", command])
    except OSError as error:
        print(f"overnight: cannot start the agent: {error}", file=sys.stderr, flush=True)
        returncode = 127
    ended = {"signal": -returncode} if returncode < 0 else {"exit_code": returncode}
    with os.fdopen(status_fd, "w") as status:
        json.dump(ended, status)
    return 128 - returncode if returncode < 0 else returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv))
