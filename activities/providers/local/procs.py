"""Processes of the local engine: launching agents, reading their records, signalling them.

An agent's folder (`<sandbox>/processes/<process_id>/`) holds `launch.json` (what to run),
`process.json` (pid and pgid, written by the launcher once the agent runs), `exit.json` (how it
ended) and `output.log`. Any worker process can read them, before or after a restart.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from activities.models import ProcessState
from activities.providers.local import launcher
from activities.providers.local import netns as local_netns
from activities.providers.local import ns as local_ns
from activities.providers.local.files import read_json, write_json
from activities.providers.local.isolation import Wrapped
from activities.providers.protocol import CommandOutput, ProviderError

LAUNCHER = Path(launcher.__file__)
# How long a launcher may take to report the agent's pid before the start counts as failed.
LAUNCH_REPORT_SECONDS = 15.0
OUTPUT_CAP = 1024 * 1024


@dataclass(frozen=True)
class ProcessRecord:
    """One agent process as the local engine knows it."""

    process_id: str
    state: ProcessState
    exit_code: int | None
    command: str
    cwd: str
    pid: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    # Why the engine killed it ("timeout", "stopped"), when it did.
    kill_reason: str | None = None


def read_record(proc_dir: Path) -> ProcessRecord:
    """The current state of the agent in `proc_dir` (which must exist)."""
    launch = read_json(proc_dir / launcher.LAUNCH_FILE) or {}
    started = read_json(proc_dir / launcher.PROCESS_FILE)
    ended = read_json(proc_dir / launcher.EXIT_FILE)
    record = ProcessRecord(
        process_id=proc_dir.name,
        state="running",
        exit_code=None,
        command=str(launch.get("sandbox_command", "")),
        cwd=str(launch.get("sandbox_cwd", "")),
        pid=started.get("pid") if started else None,
        started_at=started.get("started_at") if started else None,
    )
    if ended is None and started is not None and not _alive(started):
        # The launcher may have written exit.json since we looked.
        ended = read_json(proc_dir / launcher.EXIT_FILE) or {"state": "killed"}
    if ended is not None:
        return dataclasses.replace(
            record,
            state="killed" if ended.get("state") == "killed" else "exited",
            exit_code=ended.get("exit_code"),
            ended_at=ended.get("ended_at"),
            kill_reason=ended.get("reason"),
        )
    if started is None and time.time() - float(launch.get("created_at", 0)) > LAUNCH_REPORT_SECONDS:
        return dataclasses.replace(record, state="killed")  # the launcher died
    return record


def _alive(started: dict[str, object]) -> bool:
    """Whether the agent may still run, or has ended without its launcher having written
    `exit.json` yet (then the exit code is a moment away: not a kill)."""
    return _agent_alive(started) or _launcher_alive(started)


def _launcher_alive(started: dict[str, object]) -> bool:
    pid = started.get("launcher_pid")
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes() if isinstance(pid, int) else b""
        return str(LAUNCHER).encode() in cmdline
    except OSError:
        return False


def _agent_alive(started: dict[str, object]) -> bool:
    pid = started.get("pid")
    if not isinstance(pid, int):
        return False
    expected = started.get("proc_start")
    return pid_alive(pid, expected if isinstance(expected, str) else None)


def pid_alive(pid: int, expected: str | None = None) -> bool:
    """Whether `pid` runs (and, given its start time, is still the process that had it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return True  # not ours to look at: it answered the signal, so count it alive
    if stat[0] in ("Z", "X"):
        # Ended, waiting to be reaped: its launcher died, and not every init reaps at once.
        return False
    return expected is None or stat[19] == expected


def launch(
    proc_dir: Path,
    *,
    wrapped: Wrapped,
    sandbox_file: Path,
    sandbox_command: str,
    sandbox_cwd: str,
) -> None:
    """Start the launcher for a new agent and wait until it reports the agent's pid.

    `proc_dir` must be new and claimed by the caller (under the sandbox lock). The env goes
    only to the process, never to a file: it may hold secrets.
    """
    proc_dir.mkdir(parents=True)
    write_json(
        proc_dir / launcher.LAUNCH_FILE,
        {
            "argv": wrapped.argv,
            "cwd": wrapped.cwd,
            "network": wrapped.network,
            "sandbox_file": str(sandbox_file),
            "sandbox_command": sandbox_command,
            "sandbox_cwd": sandbox_cwd,
            "created_at": time.time(),
        },
    )
    with open(proc_dir / "launcher.log", "ab") as log:
        starter = subprocess.Popen(
            [sys.executable, "-I", str(LAUNCHER), str(proc_dir)],
            env=wrapped.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        starter.wait()  # it forks and exits at once; the launcher itself is detached
    give_up = time.monotonic() + LAUNCH_REPORT_SECONDS
    while time.monotonic() < give_up:
        if (proc_dir / launcher.PROCESS_FILE).exists() or (proc_dir / launcher.EXIT_FILE).exists():
            return
        time.sleep(0.01)
    raise ProviderError(f"the launcher for {proc_dir.name} did not report", kind="LaunchFailed")


def signal_group(proc_dir: Path, sig: signal.Signals) -> None:
    """Send `sig` to the agent's process group if the agent still runs: to every process of
    its PID namespace when it is isolated (SIGKILL: to the namespace's PID 1)."""
    started = read_json(proc_dir / launcher.PROCESS_FILE)
    if started is None or (proc_dir / launcher.EXIT_FILE).exists() or not _alive(started):
        return
    if started.get("pid_ns") is not None:
        if sig == signal.SIGKILL:
            local_ns.kill_namespace(int(started["ns_pid"]), int(started["pid_ns"]))
        else:
            local_ns.signal_namespace(int(started["pid_ns"]), sig)
    try:
        os.killpg(int(started["pgid"]), sig)
    except (ProcessLookupError, PermissionError):
        pass


def all_records(procs_dir: Path) -> list[ProcessRecord]:
    """Every agent of a sandbox, in the order they started."""
    records = [read_record(d) for d in procs_dir.iterdir() if d.is_dir()]
    return sorted(records, key=lambda r: (r.started_at or 0, r.process_id))


def signal_all(procs_dir: Path, sig: signal.Signals) -> None:
    for proc_dir in procs_dir.iterdir():
        if proc_dir.is_dir():
            signal_group(proc_dir, sig)


def wait_all_ended(procs_dir: Path, *, timeout: float) -> None:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up and any(r.state == "running" for r in all_records(procs_dir)):
        time.sleep(0.02)


def run_command(wrapped: Wrapped, *, timeout_seconds: float) -> CommandOutput:
    """Run a command to completion; at the timeout its whole process group is killed (an
    isolated one's sandbox dies with its bwrap: `--die-with-parent`). An isolated command
    with a network of its own waits, held by bwrap, until the network is plugged in."""
    pipes = local_ns.Pipes(wrapped.argv, wrapped.network, local_netns.start)
    try:
        return _run_piped(wrapped, pipes, timeout_seconds)
    finally:
        # The worker lives for weeks: a pipe end left open per command runs it out of fds.
        pipes.close()


def _run_piped(wrapped: Wrapped, pipes: local_ns.Pipes, timeout_seconds: float) -> CommandOutput:
    try:
        proc = subprocess.Popen(
            pipes.argv,
            cwd=wrapped.cwd,
            env=wrapped.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=pipes.pass_fds(),
        )
    except OSError as error:
        return CommandOutput(exit_code=127, stdout="", stderr=f"cannot run: {error}\n")
    timed_out = False
    try:
        pipes.started()
        try:
            out, err = proc.communicate(timeout=max(timeout_seconds, 0.001))
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate()
    except BaseException:
        # Its network could not be plugged in (or the wait was interrupted): the command must
        # not outlive this call, nor be left unreaped.
        _kill_and_reap(proc)
        raise
    finally:
        pipes.close_network()
    if pipes.failure:
        err = f"{pipes.failure}\n".encode() + err
    return CommandOutput(
        exit_code=None if timed_out else proc.returncode,
        stdout=out[:OUTPUT_CAP].decode(errors="replace"),
        stderr=err[:OUTPUT_CAP].decode(errors="replace"),
        timed_out=timed_out,
    )


def _kill_and_reap(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()
