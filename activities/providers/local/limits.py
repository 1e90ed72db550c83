"""Resource limits of local sandboxes: `vcpu` and `memory_mib`, where the machine allows them.

- `cgroup`: the sandbox's own cgroup (see cgroup_plan) holds its memory, its processes and,
  where the controller is there, its CPU: one cap on everything the sandbox runs, written
  when it is made. Where it has a cgroup but not the memory controller, `prlimit` below.
- `systemd`: each agent and command runs in a transient systemd scope (`systemd-run --scope`,
  `--user` unless root) with `CPUQuota` and `MemoryMax`: a real cgroup limit on the whole
  sandbox process tree. Needs systemd as init and a bus to talk to it.
- `prlimit`: elsewhere, memory only, per process (`prlimit --data`, RLIMIT_DATA: the writable
  memory a process may map, so runtimes that reserve address space, like V8 or the JVM, still
  start); the CPU is not limited.
- `none`: neither tool is here; nothing is limited.

Which one a sandbox gets is decided when it is created, recorded, and said in its status.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from typing import Literal

LimitsKind = Literal["cgroup", "systemd", "prlimit", "none"]
PROBE_SECONDS = 10.0
# How long a failed probe is believed: systemd may come up, a user may log in.
RETRY_PROBE_SECONDS = 60.0
_probed: tuple[float, bool] | None = None


def scope_prefix(vcpu: int, memory_mib: int) -> list[str]:
    """The command prefix that runs what follows in a limited systemd scope."""
    user = [] if os.geteuid() == 0 else ["--user"]
    return [
        "systemd-run",
        *user,
        "--scope",
        "--quiet",
        "--collect",
        "-p",
        f"MemoryMax={memory_mib}M",
        "-p",
        "MemorySwapMax=0",
        "-p",
        f"CPUQuota={vcpu * 100}%",
        "--",
    ]


def systemd_scopes_work() -> bool:
    """Whether `systemd-run --scope` with limits works for this user here (probed, cached)."""
    global _probed
    now = time.monotonic()
    if _probed is not None and (_probed[1] or now - _probed[0] < RETRY_PROBE_SECONDS):
        return _probed[1]
    works = False
    if shutil.which("systemd-run") is not None and os.path.isdir("/run/systemd/system"):
        try:
            done = subprocess.run(
                [*scope_prefix(1, 64), "true"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_SECONDS,
            )
            works = done.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            works = False
    _probed = (now, works)
    return works


def choose(limited: Sequence[str] = (), *, own_cgroup: bool = False) -> LimitsKind:
    """`limited`: what the sandbox's own cgroup limits; `own_cgroup`: it has one, so no
    systemd scope may take its processes out of it."""
    if "memory" in limited:
        return "cgroup"
    if not own_cgroup and systemd_scopes_work():
        return "systemd"
    return "prlimit" if shutil.which("prlimit") is not None else "none"


def prefix(kind: str, vcpu: int, memory_mib: int, *, processes: int | None = None) -> list[str]:
    """What goes before a sandbox's command to limit it (and all it starts). `processes`:
    how many processes its user may hold at once (for a sandbox with a user of its own)."""
    if kind == "systemd":
        tasks = ["-p", f"TasksMax={processes}"] if processes is not None else []
        scope = scope_prefix(vcpu, memory_mib)
        return [*scope[:-1], *tasks, "--"]
    if kind == "cgroup":
        return []
    if kind == "prlimit":
        nproc = [f"--nproc={processes}"] if processes is not None else []
        return ["prlimit", f"--data={memory_mib * 1024 * 1024}", *nproc, "--"]
    return []


def describe(kind: str, vcpu: int, memory_mib: int, limited: Sequence[str] = ()) -> str:
    if kind == "cgroup":
        if "cpu" in limited:
            return f"limited to {vcpu} vCPU and {memory_mib} MiB (its cgroup)"
        return f"memory at most {memory_mib} MiB (its cgroup); CPU not limited"
    if kind == "systemd":
        return f"limited to {vcpu} vCPU and {memory_mib} MiB (systemd scope)"
    if kind == "prlimit":
        return (
            f"memory at most {memory_mib} MiB per process (prlimit); "
            "CPU not limited (no systemd scope here)"
        )
    return "CPU and memory not limited (no systemd scope or prlimit here)"
