"""The first process inside an isolated local sandbox: runs the agent and says how it ended.

`python -I -S inside.py FD COMMAND` runs `bash -c COMMAND` and writes one JSON object
to the pipe FD when it ends: `{"exit_code": N}`, or `{"signal": N}` when a signal killed it.
Bubblewrap's own exit status cannot tell `exit 137` from a SIGKILL, and overnight reads the
two differently (a crash, or an agent killed).

Standard library only, and no site packages: it runs inside the sandbox.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def main(argv: list[str]) -> int:
    status_fd, command = int(argv[1]), argv[2]
    os.set_inheritable(status_fd, False)  # the agent's processes must not hold the pipe
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
