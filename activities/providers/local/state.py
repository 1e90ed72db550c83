"""A local sandbox's persisted state, its names and its lock.

`sandbox.json` is rewritten atomically on every change, under the sandbox's `.lock` (an
flock, so a process that dies releases it). Readers need no lock.
"""

from __future__ import annotations

import dataclasses
import fcntl
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from activities.providers.protocol import ProviderError
from overnight.core.home import overnight_home

LocalState = Literal["running", "paused", "stopped"]
LeaseEnd = Literal["pause", "stop"]
SANDBOX_FILE = "sandbox.json"
# Why a sandbox paused or stopped at its lease end (Runtime's `stopReason` for a stop).
LEASE_EXPIRED = "lease_expired"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
PROCESS_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


# A create refused for what the worker lacks, not the spec (workflows/pure/hopeless.py leaves it to
# a person: the run needs attention once rather than failing).
WORKER_NOT_READY = "WorkerNotReady"


def default_home() -> Path:
    return overnight_home()


def invalid_request(message: str) -> ProviderError:
    return ProviderError(message, kind="InvalidRequest", retryable=False)


def worker_not_ready(message: str) -> ProviderError:
    """What the spec asks is fine, but this worker lacks it (a bind's folder, a mount's source,
    its permissions): no retry helps, yet a person can fix the worker and extend the run."""
    return ProviderError(message, kind=WORKER_NOT_READY, retryable=False)


@dataclasses.dataclass(frozen=True)
class SandboxMeta:
    """A local sandbox's state. Times are Unix seconds; `deadline` None means no time limit."""

    id: str
    name: str
    labels: dict[str, str]
    state: LocalState
    created_at: float
    timeout_seconds: float | None
    deadline: float | None
    vcpu: int
    memory_mib: int
    stop_reason: str | None = None
    stopped_at: float | None = None
    # What the lease end does: "pause" keeps memory and files (Runtime's default), "stop" ends it.
    on_lease_end: LeaseEnd = "stop"
    # The lease a wake grants: the time limit asked for at create (None: `timeout_seconds`).
    lease_seconds: float | None = None
    # Set while paused: when, and why ("lease_expired", "requested", or "disk limit of ...").
    paused_at: float | None = None
    pause_reason: str | None = None
    # How its processes are isolated ("bubblewrap", or "none": sandboxes made before isolation
    # existed read as "none") and limited ("systemd" or "prlimit"; see limits), and the
    # host paths bound into it (`{"path", "writable"}`).
    isolation: str = "none"
    limits: str = "prlimit"
    binds: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # Its network: "gateway" (a namespace of its own with no route out: the worker's gateway
    # on `gateway_port`, for the names in `egress`, and the worker's loopback on `host_ports`),
    # "own" (sandboxes made before the gateway: outbound through slirp4netns) or "host" (the
    # worker's; sandboxes made before sandboxes had a network of their own read as "host").
    network: str = "host"
    host_ports: list[int] = dataclasses.field(default_factory=list)
    # The names the gateway connects it to (`*`: every public name); None: no gateway.
    egress: list[str] | None = None
    gateway_port: int | None = None
    # Its run's origin folder, served to it by the gateway (`{"path", "branch", "run_id"}`).
    git_origin: dict[str, str] | None = None
    # Its model calls, served by the gateway with the worker's key (activities/gateway/
    # model_origin.py: `{"upstream", "credential_env", "run_id", "cap_usd"}`); None: none.
    model: dict[str, Any] | None = None
    # The unprivileged user its processes run as (a worker running as root); None: the
    # worker's own user.
    uid: int | None = None
    # A stopped sandbox's disk is freed (see disk): when, and how many bytes it held then.
    # Stopped but not freed: a stop cut short (a killed worker), finished by the next stop
    # or `overnight reap`.
    freed_at: float | None = None
    freed_bytes: int | None = None
    # How a pause holds its processes (see cgroups): "cgroup2", "cgroup1" or "systemd" (its
    # own cgroup, frozen), "none" (no cgroup could be had: a pause ends its agents, files
    # kept) or "signals" (sandboxes made before cgroups: SIGSTOP). With a cgroup: the
    # freezer's folder, every cgroup folder its processes join with the limits written there
    # (any worker acts on them from this record), what those limit ("memory", "pids",
    # "cpu"), and its systemd slice; `no_cgroup`: why it has none.
    freezer: str = "signals"
    cgroup: str | None = None
    cgroups: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    cgroup_limits: list[str] = dataclasses.field(default_factory=list)
    systemd_slice: str | None = None
    no_cgroup: str = ""
    # How its files are limited (see disk_limit): "image" (an ext4 image of `disk_mib` MiB),
    # "watch" (measured, paused past `disk_mib`) or "none" (sandboxes made before had none).
    disk: str = "none"
    disk_mib: int | None = None
    # The worker's own folders shown in it (`{"source", "target", "writable"}`; see
    # worker_mounts): a coding agent's CLI, the kit, the run's session store.
    mounts: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # A paused sandbox that let go of what it held on the host (see host_holds): when. Its
    # image is unmounted (a read or a wake mounts it again); `agents_ended_at`: its agents
    # were ended for it, since no run wakes them (kept after its run ended).
    released_at: float | None = None
    agents_ended_at: float | None = None
    # A sandbox that let go whose image's loop device was still attached when it gave up
    # waiting (which, for how long): its host holds it until its last user closes it.
    loop_held: str | None = None

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> SandboxMeta:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in value.items() if k in fields})

    def expired(self, now: float) -> bool:
        """Its lease ran out while it was running (a paused sandbox's lease does not run)."""
        return self.state == "running" and self.deadline is not None and now >= self.deadline

    def pause_ends_agents(self) -> bool:
        """Its pause cannot freeze (no cgroup): it ends the agents and keeps the files."""
        return self.freezer == "none"

    def fresh_lease(self) -> float | None:
        """The lease length a wake grants."""
        return self.lease_seconds if self.lease_seconds is not None else self.timeout_seconds


def process_id_for(start_key: str) -> str:
    """The process id a start key gets: the key itself (keys are `{run_id}-{attempt}-{n}`)."""
    if not PROCESS_ID_PATTERN.match(start_key):
        raise invalid_request(f"{start_key!r} is not a valid start key")
    return start_key


@contextmanager
def flock(path: Path) -> Iterator[None]:
    with open(path, "ab") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
