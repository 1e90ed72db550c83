"""Runs one agent process for the local engine and records how it ended.

The engine starts this file as `python -I local_launcher.py PROCESS_DIR`, in a new session and
with the agent's environment. It detaches at once (forks; the engine reaps the parent), so the
agent outlives the worker process that started it. Then it:

1. starts `bash -c COMMAND` in the agent's working directory, in a process group of its own,
   with stdout and stderr appended to `output.log`;
2. writes `process.json` (pid, pgid, start time) atomically;
3. waits, re-reading the sandbox file every `POLL_SECONDS`: at the deadline (which `extend` may
   move) or when the sandbox is stopped, it kills the agent's process group;
4. when the agent exits, kills what is left of its group and writes `exit.json` atomically, so
   any later worker process can read the exit code.

Standard library only: it must run whatever the agent's environment holds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LAUNCH_FILE = "launch.json"
PROCESS_FILE = "process.json"
EXIT_FILE = "exit.json"
OUTPUT_FILE = "output.log"
POLL_SECONDS = 0.2
# The exit code a shell gives for a command it could not start.
CANNOT_START = 127


def write_json(path: Path, value: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w") as out:
        json.dump(value, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def proc_start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (Linux), to tell it from a later process reusing it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def should_kill(sandbox_file: Path) -> str | None:
    """Why the agent must die now (`timeout` or `stopped`), or None."""
    try:
        sandbox = json.loads(sandbox_file.read_text())
    except (OSError, ValueError):
        return None
    deadline = sandbox.get("deadline")
    if deadline is not None and time.time() >= deadline:
        return "timeout"
    if sandbox.get("state") == "stopped":
        return "stopped"
    return None


def supervise(proc_dir: Path) -> None:
    launch = json.loads((proc_dir / LAUNCH_FILE).read_text())
    sandbox_file = Path(launch["sandbox_file"])
    with open(proc_dir / OUTPUT_FILE, "ab") as output:
        try:
            child = subprocess.Popen(
                ["bash", "-c", launch["command"]],
                cwd=launch["cwd"],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as error:
            output.write(f"overnight: cannot start the agent: {error}\n".encode())
            write_json(
                proc_dir / EXIT_FILE,
                {"state": "exited", "exit_code": CANNOT_START, "ended_at": time.time()},
            )
            return
    write_json(
        proc_dir / PROCESS_FILE,
        {
            "pid": child.pid,
            "pgid": child.pid,
            "proc_start": proc_start_time(child.pid),
            "launcher_pid": os.getpid(),
            "started_at": time.time(),
        },
    )
    reason: str | None = None
    while True:
        try:
            returncode = child.wait(timeout=POLL_SECONDS)
            break
        except subprocess.TimeoutExpired:
            pass
        why = should_kill(sandbox_file)
        if why is not None:
            reason = reason or why
            kill_group(child.pid)
    # Helpers the agent left behind in its group go with it.
    kill_group(child.pid)
    killed = returncode < 0
    write_json(
        proc_dir / EXIT_FILE,
        {
            "state": "killed" if killed else "exited",
            "exit_code": None if killed else returncode,
            "signal": -returncode if killed else None,
            "reason": reason,
            "ended_at": time.time(),
        },
    )


def main(argv: list[str]) -> int:
    proc_dir = Path(argv[1])
    if os.fork() > 0:
        # The engine waits for this parent; the child is adopted by init and lives on.
        os._exit(0)
    try:
        supervise(proc_dir)
    except BaseException as error:  # a launcher bug must still leave a record behind
        if not (proc_dir / EXIT_FILE).exists():
            write_json(
                proc_dir / EXIT_FILE,
                {
                    "state": "killed",
                    "exit_code": None,
                    "error": repr(error),
                    "ended_at": time.time(),
                },
            )
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
