"""Runs one agent process for the local engine and records how it ended.

The engine starts this file as `python -I launcher.py PROCESS_DIR`, in a new session and
with the agent's environment. It detaches at once (forks; the engine reaps the parent), so the
agent outlives the worker process that started it. Then it:

1. starts the agent's argv (`bash -c COMMAND`, or for an isolated sandbox bubblewrap around it,
   see isolation) in a process group of its own, plugs in its network (netns), and pumps its
   stdout and stderr into `output.log`, capped (output_cap);
2. writes `process.json` (pid, pgid, start time; isolated: its PID namespace) atomically;
3. waits, looking at the sandbox file every `POLL_SECONDS` (re-read only when it changed): at
   the lease end (which `extend` and `wake` move) it pauses the sandbox (freezes its cgroup,
   see cgroups, under the sandbox lock; without a cgroup it ends every agent of it) or, for
   `on_lease_end="stop"`, kills its own group; when the sandbox is stopped (or paused without
   a cgroup) it kills its group;
4. when the agent exits, kills what is left of its group (isolated: of its namespace), closes
   its output and writes `exit.json` atomically (with its own pid), so any later worker
   process can read the exit code. It then ends its network helpers and exits: nothing is
   recorded after `exit.json`, so the engine may end a launcher that lingers (kept).

Standard library only: it must run whatever the agent's environment holds.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import select
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
# After the agent ended: how long its last output may take to be read.
DRAIN_SECONDS = 2.0
# The exit code a shell gives for a command it could not start.
CANNOT_START = 127


def _sibling(name: str) -> Any:
    """A module next to this file, loaded by path: `python -I` puts no folder on sys.path."""
    spec = importlib.util.spec_from_file_location(
        f"_launcher_{name}", Path(__file__).parent / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


local_ns = _sibling("ns")
local_cgroups = _sibling("cgroups")
local_netns = _sibling("netns")
local_output = _sibling("output_cap")


def write_json(path: Path, value: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w") as out:
        json.dump(value, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def proc_start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (Linux), to tell it from a later process reusing it."""
    fields = local_ns.stat_fields(pid)
    return None if fields is None else fields[19]


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


LEASE_EXPIRED = "lease_expired"
# Why an agent ended that its sandbox's keeping after its run ended ended (engine.let_go).
KEPT = "kept"


class SandboxFile:
    """The sandbox's state file, re-read only when its modification time changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: int | None = None
        self._value: dict[str, Any] = {}

    def read(self) -> dict[str, Any]:
        try:
            stamp = self.path.stat().st_mtime_ns
            if stamp != self._stamp:
                self._value, self._stamp = json.loads(self.path.read_text()), stamp
        except (OSError, ValueError):
            pass
        return self._value


def lease_over(sandbox: dict[str, Any]) -> bool:
    deadline = sandbox.get("deadline")
    return sandbox.get("state") == "running" and deadline is not None and time.time() >= deadline


def should_kill(sandbox: dict[str, Any]) -> str | None:
    """Why the agent must die now (`lease_expired`, `stopped`, `kept`: paused and kept after
    its run ended, which no run wakes, or `paused` in a sandbox with no cgroup to freeze), or
    None."""
    if lease_over(sandbox) and sandbox.get("on_lease_end", "stop") == "stop":
        return LEASE_EXPIRED
    if sandbox.get("state") == "stopped":
        return "stopped"
    if sandbox.get("state") == "paused" and sandbox.get("agents_ended_at") is not None:
        return KEPT
    if sandbox.get("state") == "paused" and sandbox.get("freezer") == local_cgroups.NONE:
        return "paused"
    return None


def pause_at_lease_end(sandbox_file: Path) -> None:
    """The lease ran out: pause the whole sandbox, as the engine would on its next look.

    Under the sandbox lock and re-checked there, so a concurrent `wake` or `extend` wins. A
    freeze not done in time leaves the sandbox running (the next look tries again)."""
    with open(sandbox_file.parent / ".lock", "ab") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            sandbox = json.loads(sandbox_file.read_text())
            if not lease_over(sandbox):
                return
            running = dict(sandbox)
            sandbox.update(state="paused", paused_at=time.time(), pause_reason=LEASE_EXPIRED)
            if sandbox.get("freezer") == local_cgroups.NONE:
                write_json(sandbox_file, sandbox)  # first: each launcher records why it ended
            hold(sandbox_file.parent, running)
            write_json(sandbox_file, sandbox)
        except (OSError, ValueError, local_cgroups.FreezeTimeout):
            return
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def hold(folder: Path, sandbox: dict[str, Any]) -> None:
    """Hold every process of the sandbox, as the engine's pause does: its cgroup frozen (done
    when this returns); without one, every agent killed; made before cgroups, SIGSTOPped."""
    freezer = sandbox.get("freezer", local_cgroups.SIGNALS)
    if freezer in local_cgroups.FROZEN_KINDS and sandbox.get("cgroup"):
        local_cgroups.freeze(freezer, sandbox["cgroup"])
        return
    for proc_dir in (folder / "processes").iterdir():
        if freezer == local_cgroups.NONE:
            kill_agent(proc_dir)
        else:
            stop_group(proc_dir)


def kill_agent(proc_dir: Path) -> None:
    """SIGKILL one agent (isolated: its whole namespace), if it still runs; its launcher
    records how it ended."""
    try:
        started = json.loads((proc_dir / PROCESS_FILE).read_text())
    except (OSError, ValueError):
        return
    if (proc_dir / EXIT_FILE).exists():
        return
    local_ns.kill_recorded(started)
    try:
        kill_group(int(started["pgid"]))
    except (KeyError, ValueError):
        pass


def stop_group(proc_dir: Path) -> None:
    """SIGSTOP one agent's group (isolated: its whole namespace), if it still runs (its exit
    file says it ended)."""
    try:
        started = json.loads((proc_dir / PROCESS_FILE).read_text())
    except (OSError, ValueError):
        return
    if (proc_dir / EXIT_FILE).exists():
        return
    if started.get("pid_ns") is not None:
        local_ns.signal_namespace(int(started["pid_ns"]), signal.SIGSTOP)
    try:
        os.killpg(int(started["pgid"]), signal.SIGSTOP)
    except (ProcessLookupError, PermissionError, KeyError, ValueError):
        pass


def supervise(proc_dir: Path) -> None:
    launch = json.loads((proc_dir / LAUNCH_FILE).read_text())
    sandbox_file = SandboxFile(Path(launch["sandbox_file"]))
    pipes = local_ns.Pipes(
        launch.get("argv") or ["bash", "-c", launch["command"]],
        launch.get("network"),
        local_netns.start,
    )
    try:
        _supervise(proc_dir, launch, sandbox_file, pipes)
    finally:
        pipes.close_network()
        pipes.close()


def _supervise(
    proc_dir: Path, launch: dict[str, Any], sandbox_file: SandboxFile, pipes: Any
) -> None:
    output = local_output.CappedOutput(proc_dir / OUTPUT_FILE)
    try:
        ended = _run(proc_dir, launch, sandbox_file, pipes, output)
    finally:
        output.close()
    # After the output is whole (its capped tail is written at the close): a reader that sees
    # the exit sees all of it.
    write_json(proc_dir / EXIT_FILE, {**ended, "launcher_pid": os.getpid()})


def _run(
    proc_dir: Path, launch: dict[str, Any], sandbox_file: SandboxFile, pipes: Any, output: Any
) -> dict[str, Any]:
    """Run the agent to its end; how it ended (the record for `exit.json`)."""
    read_end, write_end = os.pipe()
    try:
        child = subprocess.Popen(
            pipes.argv,
            cwd=launch["cwd"],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=pipes.pass_fds(),
        )
    except OSError as error:
        os.close(read_end)
        output.note(f"overnight: cannot start the agent: {error}")
        return {"state": "exited", "exit_code": CANNOT_START, "ended_at": time.time()}
    finally:
        os.close(write_end)
    os.set_blocking(read_end, False)
    namespace = pipes.started()
    if pipes.failure:
        output.note(pipes.failure)
    write_json(
        proc_dir / PROCESS_FILE,
        {
            "pid": child.pid,
            "pgid": child.pid,
            "proc_start": proc_start_time(child.pid),
            "launcher_pid": os.getpid(),
            "started_at": time.time(),
            **namespace,
        },
    )
    reason: str | None = None
    open_pipe = True
    next_look = time.monotonic()
    # The agent's end wakes the wait at once (its pidfd), whoever still holds its output pipe.
    ended = _pidfd(child.pid)
    while True:
        if open_pipe:
            select.select([read_end, *ended], [], [], POLL_SECONDS)
            open_pipe = local_output.drain(read_end, output)
        returncode = child.poll() if open_pipe else _wait(child, ended)
        if returncode is not None:
            break
        if time.monotonic() < next_look:
            continue
        next_look = time.monotonic() + POLL_SECONDS
        sandbox = sandbox_file.read()
        why = should_kill(sandbox)
        if why is not None:
            reason = reason or why
            local_ns.kill_recorded(namespace)
            kill_group(child.pid)
        elif lease_over(sandbox):
            pause_at_lease_end(sandbox_file.path)
    for fd in ended:
        os.close(fd)
    if reason is None and should_kill(sandbox_file.read()) in ("paused", KEPT):
        # The pause of a sandbox without a cgroup ended it, or its keeping after its run.
        reason = should_kill(sandbox_file.read())
    # Helpers the agent left behind in its group (and namespace) go with it.
    local_ns.kill_recorded(namespace)
    kill_group(child.pid)
    _drain_rest(read_end, output)
    killed, exit_code, sig = pipes.ending(returncode)
    return {
        "state": "killed" if killed else "exited",
        "exit_code": exit_code,
        "signal": sig,
        "reason": reason,
        "ended_at": time.time(),
    }


def _pidfd(pid: int) -> list[int]:
    """[a pidfd of `pid`] where the kernel gives one, else [] (then the waits poll)."""
    try:
        return [os.pidfd_open(pid)]
    except (OSError, AttributeError):
        return []


def _wait(child: subprocess.Popen[bytes], ended: list[int]) -> int | None:
    if ended:
        select.select(ended, [], [], POLL_SECONDS)
        return child.poll()
    try:
        return child.wait(timeout=POLL_SECONDS)
    except subprocess.TimeoutExpired:
        return None


def _drain_rest(read_end: int, output: Any) -> None:
    """What the agent printed last, once everything holding the pipe is gone (briefly)."""
    give_up = time.monotonic() + DRAIN_SECONDS
    while time.monotonic() < give_up:
        select.select([read_end], [], [], 0.05)
        if not local_output.drain(read_end, output):
            break
    os.close(read_end)


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
                    "launcher_pid": os.getpid(),
                },
            )
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
