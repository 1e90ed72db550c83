"""The one interface the sandbox activities act through, and the provider error tree.

Paths, `cwd` and commands are written as the sandbox sees them (`/workspace/...`);
a provider maps them to wherever its sandboxes really live.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Literal, Protocol, runtime_checkable

from activities.models import GatewayBooks, ProcessState, SandboxInfo
from overnight.core.isolation import HostBind


@dataclass(frozen=True)
class CommandOutput:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False


@dataclass(frozen=True)
class ProcessInfo:
    process_id: str
    state: ProcessState
    exit_code: int | None = None
    # When it ended (Unix seconds), where the provider tells: for the exit-to-noticed metric.
    ended_at: float | None = None


@dataclass(frozen=True)
class FileRead:
    """A capped file read. `data` is set only for `status == "ok"`. `refused`: something is
    there but is not read (a symlink, a FIFO, a folder: `detail` says which)."""

    status: Literal["ok", "missing", "too_large", "outside", "refused"]
    size: int = 0
    data: bytes | None = None
    detail: str = ""


@dataclass(frozen=True)
class WorkerMount:
    """A folder of the worker's own shown in a local isolated sandbox at `target` (a path
    under `/overnight/`, outside `/workspace`): a coding agent's CLI install and the agent
    kit read-only, a run's session store writable (activities.coding_agent.setup). Unlike a
    spec's `binds` these are the worker's choice, never the spec's; other providers and
    unisolated sandboxes ignore them."""

    source: str
    target: str
    writable: bool = False


@dataclass(frozen=True)
class GitOrigin:
    """A run's origin that a provider may serve its sandboxes itself (the local provider,
    through its gateway): a folder on the worker (`path`) or an http(s) URL (`url`, with the
    name of the worker's variable holding its credential), the run's branch and the run,
    whose branch and private refs alone may be pushed."""

    path: str
    branch: str
    run_id: str
    url: str = ""
    credential_env: str = ""


@dataclass(frozen=True)
class ModelAccess:
    """A run's model calls, as a provider's gateway serves them to its sandbox (docs/gateway.md):
    sent on to `upstream` (empty: the vendor's own) with the key in the worker's variable
    `credential_env`, booked to `run_id`, refused once what its host booked to the run reaches
    `cap_usd` (None: no cap)."""

    upstream: str
    credential_env: str
    run_id: str
    cap_usd: float | None = None
    # "x-api-key", or "bearer" for a token sent as one (a Claude subscription's OAuth token).
    credential_header: str = "x-api-key"


@dataclass(frozen=True)
class ModelEndpoint:
    """Where a sandbox sends its model calls (the base URL of the gateway's model routes, as
    the sandbox reaches it) and the token it sends as its API key: a capability of the
    sandbox's, void once it stops or pauses, never the key."""

    url: str
    token: str


@dataclass(frozen=True)
class SandboxRequest:
    name: str
    labels: dict[str, str]
    timeout_seconds: float
    vcpu: int
    memory_mib: int
    # The most its files may hold, MiB; None: the provider's default (local: the worker's
    # OVERNIGHT_SANDBOX_DISK_MIB, see activities.providers.local.disk_limit).
    disk_mib: int | None = None
    # "pause" keeps memory and files at the lease end, so the last checkpoint survives it.
    on_lease_end: Literal["pause", "stop"] = "pause"
    # The most the sandbox may cost over its life; Runtime enforces it even with no worker.
    max_total_cost_micros: int | None = None
    # Local sandboxes: how they are isolated, and the host paths shown in them (see
    # activities.providers.local.isolation); other providers isolate their own way and ignore these.
    isolation: Literal["bubblewrap", "none"] = "bubblewrap"
    binds: tuple[HostBind, ...] = ()
    # Local isolated sandboxes have a network of their own: the worker's loopback ports they
    # may reach. `network="host"` shares the worker's network instead (the fake Runtime API's
    # sandboxes, which stand for cloud machines with the internet: here, the loopback).
    host_ports: tuple[int, ...] = ()
    network: Literal["own", "host"] = "own"
    # The names its network may reach (`*`: every public name), on every provider: a local
    # sandbox through the worker's gateway (activities.gateway), a Runtime one by its network
    # rules. None: the provider's older way (a local sandbox: slirp4netns, outbound to all).
    egress: tuple[str, ...] | None = None
    # The run's origin when it is a folder on the worker: served to the sandbox by a provider
    # that can (ServesGit), pushes held to the run's own refs.
    origin: GitOrigin | None = None
    # Local sandboxes: the origin's folder, shown read-only only to a sandbox its provider
    # does not serve it to (no gateway): a served one needs no permission on the folder.
    origin_bind: HostBind | None = None
    # Its model calls through the provider's gateway (a provider that ServesModels), the
    # worker's key kept there. None: the sandbox calls its model API itself.
    model: ModelAccess | None = None
    # Start as a copy of this snapshot (recovery "snapshot"; see
    # activities.providers.snapshot_protocol).
    snapshot_id: str | None = None
    # Local isolated sandboxes: the worker's own folders shown in them (see WorkerMount).
    mounts: tuple[WorkerMount, ...] = ()


@dataclass(frozen=True)
class WatchRequest:
    """What one `watch` waits for: the agent `process_id` in `sandbox_id`, its checkpoint at
    `checkpoint_path` (touched since `token`, when `report_touch`), at most `wait_seconds`.
    `requests_path`: the kit's requests file beside the checkpoint, whose writes are touches
    too, said apart."""

    sandbox_id: str
    process_id: str
    checkpoint_path: str
    _: KW_ONLY
    token: str | None
    wait_seconds: float
    report_touch: bool = True
    requests_path: str | None = None


@dataclass(frozen=True)
class Sighting:
    """What one `watch` call saw. `token` lets the next call carry on where this one ended
    (opaque: a Runtime watch id and cursor, or a local file stamp)."""

    sandbox: SandboxInfo
    process: ProcessInfo
    # The checkpoint may have changed since `token` (read it to know).
    checkpoint_touched: bool
    token: str | None
    # The agent kit's requests file (`requests_path`) may have changed since `token`.
    requests_touched: bool = False


@dataclass(frozen=True)
class AgentLaunch:
    """An agent start. `start_key` makes it idempotent: the same key never starts twice."""

    start_key: str
    command: str
    cwd: str
    env: dict[str, str] = field(default_factory=dict)
    # Where the agent's exit code is written when it ends, for providers that watch files
    # rather than processes (Runtime); None: not written.
    exit_marker: str | None = None


class ProviderError(Exception):
    """A provider failure. `retryable=False` means retrying cannot help (bad key, bad request)."""

    def __init__(self, message: str, *, kind: str = "ProviderError", retryable: bool = True):
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable


class SandboxNotFound(ProviderError):
    def __init__(self, sandbox_id: str):
        super().__init__(f"sandbox {sandbox_id} not found", kind="SandboxNotFound", retryable=False)
        self.sandbox_id = sandbox_id


class SandboxNotRunning(ProviderError):
    def __init__(self, sandbox_id: str, state: str):
        super().__init__(
            f"sandbox {sandbox_id} is {state}", kind="SandboxNotRunning", retryable=False
        )
        self.sandbox_id = sandbox_id
        self.state = state


@runtime_checkable
class KeepsPaused(Protocol):
    """A provider that deletes paused sandboxes itself after a retention (Runtime's
    `:retention`); the local provider keeps them until `overnight reap` deletes them."""

    async def set_retention(self, sandbox_id: str, days: int) -> SandboxInfo:
        """Keep the paused sandbox `days` (1 to 365) before the provider deletes it."""
        ...


@runtime_checkable
class LetsGo(Protocol):
    """A provider whose paused sandboxes hold something on the worker's host (the local one:
    agents' launchers, network helpers, a loop-mounted image), which a sandbox kept after its
    run ended lets go of: its agents ended (no run wakes them), its files kept, mounted again
    when read."""

    async def let_go(self, sandbox_id: str) -> SandboxInfo:
        """End the paused sandbox's agents and let go of what it holds on the host; a
        sandbox that is not paused is left as it is."""
        ...


@runtime_checkable
class ServesGit(Protocol):
    """A provider that serves a sandbox its run's origin (`SandboxRequest.origin`)."""

    async def git_remote(self, sandbox_id: str) -> str | None:
        """The URL the sandbox clones, fetches and pushes its origin at (credential
        included; None: it is not served, and the sandbox uses the origin as the spec names
        it)."""
        ...


@runtime_checkable
class CountsRefusals(Protocol):
    """A provider that says which of a sandbox's connections its network refused (the local
    provider's gateway, Runtime's network rules)."""

    async def egress_refusals(self, sandbox_id: str) -> dict[str, int]:
        """Refused connections of the sandbox so far, per host name (or address) asked for;
        empty when none, or when it cannot be told."""
        ...


@runtime_checkable
class ServesModels(Protocol):
    """A provider whose gateway serves its sandboxes' model calls (`SandboxRequest.model`) and
    keeps their books (the local provider)."""

    async def model_endpoint(self, sandbox_id: str) -> ModelEndpoint | None:
        """Where the sandbox sends its model calls; None when they are not served to it."""
        ...

    async def model_books(self, run_id: str) -> GatewayBooks:
        """What the gateway booked to `run_id` on this host so far."""
        ...

    async def set_model_cap(self, sandbox_id: str, cap_usd: float | None) -> bool:
        """Cap the sandbox's next calls: refused once its host's books of the run reach
        `cap_usd` (None: no cap); False when the sandbox has no model entry (nothing changed)."""
        ...


@runtime_checkable
class HoldsEgressSecrets(Protocol):
    """A provider whose sandboxes use secrets they never hold: its own proxy, outside them,
    puts the value into their HTTPS requests to the secret's hosts (Runtime's egress secrets;
    overnight/core/runtime_model_key.py)."""

    async def hold_egress_secret(self, name: str, value: str, hosts: Sequence[str]) -> None:
        """Store (or replace) the secret `name`, bound to `hosts`."""
        ...

    async def drop_egress_secret(self, name: str) -> bool:
        """Erase the secret `name`; False when there was none."""
        ...


class SandboxProvider(Protocol):
    """What overnight needs from a place that runs agents."""

    async def get_or_create(self, request: SandboxRequest) -> tuple[SandboxInfo, bool]:
        """The sandbox named `request.name`, creating it if absent. True when created now."""
        ...

    async def sandbox(self, sandbox_id: str) -> SandboxInfo:
        """Current state; `state="missing"` (not an error) for one that no longer exists."""
        ...

    async def run(
        self, sandbox_id: str, command: str, *, cwd: str | None = None, timeout_seconds: float = 600
    ) -> CommandOutput:
        """Run a shell command to completion."""
        ...

    async def start_agent(self, sandbox_id: str, launch: AgentLaunch) -> ProcessInfo:
        """Start the agent unless a process with `launch.start_key` already exists there."""
        ...

    async def process(self, sandbox_id: str, process_id: str) -> ProcessInfo:
        """A process's state and exit code; `state="missing"` if the sandbox has no such one."""
        ...

    async def watch(self, request: WatchRequest) -> Sighting:
        """Wait until the agent stops running, its sandbox stops running, or (`report_touch`)
        the checkpoint may have changed since `token`, at most `wait_seconds`. A caller that
        already knows the checkpoint changed passes `report_touch=False` and is woken only for
        the rest (a touch seen meanwhile is still said when the watch returns). With
        `requests_path` (the kit's requests file, beside the checkpoint) a write to that file
        is a touch too, said apart (`requests_touched`). Never wakes a paused sandbox."""
        ...

    async def read_file(
        self, sandbox_id: str, path: str, max_bytes: int, *, seen_running: bool = False
    ) -> FileRead:
        """Read a file whole, refusing one larger than `max_bytes` without reading it all.
        `seen_running`: the caller has just seen the sandbox running (no state check needed)."""
        ...

    async def write_file(self, sandbox_id: str, path: str, data: bytes) -> None: ...

    async def upload_dir(self, sandbox_id: str, local_dir: str, remote_dir: str) -> None: ...

    async def pause(self, sandbox_id: str) -> SandboxInfo: ...

    async def wake(self, sandbox_id: str) -> SandboxInfo:
        """Carry a paused sandbox on, with a fresh lease; a running one is left as it is."""
        ...

    async def stop(self, sandbox_id: str) -> SandboxInfo: ...

    async def extend(self, sandbox_id: str, seconds: float) -> SandboxInfo: ...

    async def set_labels(self, sandbox_id: str, labels: dict[str, str]) -> SandboxInfo:
        """Set these labels, keeping the others (a paused sandbox is not woken)."""
        ...

    async def list(self, labels: dict[str, str], *, include_stopped: bool) -> list[SandboxInfo]: ...

    async def aclose(self) -> None: ...
