"""How a local sandbox's processes are isolated: bubblewrap, or (granted) nothing at all.

The agent is untrusted code. With `isolation="bubblewrap"` every agent and command of a
sandbox runs under `bwrap`:

- the sandbox's `workspace/` mounted at the real path `/workspace` (no rewriting of commands,
  paths or variables), its `home/` at its own path as `$HOME`, its `tmp/` as `/tmp` and
  `/var/tmp`; of the host only what agents need, read-only (`mounts`), and the spec's binds;
- its own PID namespace (it sees only its own processes; killing the namespace's PID 1 kills
  them all, `setsid` daemons too), IPC and host name;
- its own network (`network="own"`): outbound through slirp4netns, the worker's loopback
  only on `host_ports` (`netns`);
- when the worker runs as root, an unprivileged user of its own (`sandbox_uid`): bwrap keeps
  only the capabilities to change user, which `sandbox_init.py` uses at once and so loses, so no
  agent process holds a capability or root's file access; with `no_new_privs`, no setuid
  program gives them back. A worker that is not root runs them as itself, in a user
  namespace that may make no other.

With `isolation="none"` processes run on the host as the worker's user, and `/workspace` is
rewritten to the sandbox's folder in commands and variables (`files.WorkspaceMap`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from activities.providers.local import cgroups as local_cgroups
from activities.providers.local import limits as local_limits
from activities.providers.local import netns, sandbox_init
from activities.providers.local.files import WorkspaceMap
from activities.providers.local.mounts import SHIM_PATH, bwrap_mounts, shim_python
from activities.providers.local.ns import BLOCK_FD, INFO_FD, STATUS_FD
from activities.providers.local.state import SandboxMeta, invalid_request, worker_not_ready
from activities.providers.protocol import ProviderError
from overnight.core.isolation import HostBind

ISOLATION_UNAVAILABLE = "IsolationUnavailable"
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: sudo apt-get install bubblewrap; Fedora: sudo dnf "
    'install bubblewrap) or set "isolation": "none" in the spec to run without isolation'
)
SHIM = Path(sandbox_init.__file__)
PROBE_SECONDS = 10.0
RETRY_PROBE_SECONDS = 30.0
# The host users sandboxes run as when the worker is root: `first-last` (a run gets one by
# its id, so its attempts share files it made) or one number.
SANDBOX_UIDS_ENV = "OVERNIGHT_SANDBOX_UIDS"
DEFAULT_SANDBOX_UIDS = (1_000_000_000, 1_000_065_535)
# The most processes one run's sandboxes hold at once (with their own user: root workers).
MAX_PROCESSES = 1024
SANDBOX_PROCESSES_ENV = "OVERNIGHT_SANDBOX_PROCESSES"
# A sandbox with a user of its own clones and pushes repositories another user owns: its
# global git config (in its own $HOME) trusts them, as git wants for that.
SANDBOX_GITCONFIG = "[safe]\n\tdirectory = *\n"
_probed: tuple[float, str | None] | None = None


@dataclass(frozen=True)
class Wrapped:
    """A sandbox command ready for `Popen`: its argv, where it starts on the host, its env,
    and the network its bwrap waits for (`{"host_ports", "uid"}`; None: none to plug in)."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    network: dict[str, Any] | None = None


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot isolate sandboxes here, or None when it can (probed, cached)."""
    global _probed
    now = time.monotonic()
    if _probed is not None and (_probed[1] is None or now - _probed[0] < RETRY_PROBE_SECONDS):
        return _probed[1]
    _probed = (now, _probe())
    return _probed[1]


def _probe() -> str | None:
    if not sys.platform.startswith("linux"):
        return f"local sandboxes are isolated with bubblewrap, which needs Linux ({sys.platform})"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "local sandboxes are isolated with bubblewrap, and bwrap is not installed"
    probe = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    probe += [*_flags(own_network=True, as_user=False), "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=PROBE_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap cannot make a sandbox here ({error})"
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return f"bwrap cannot make a sandbox here ({why}; are user namespaces allowed?)"
    return None


def require(isolation: str, network: str) -> None:
    """Refuse a sandbox whose isolation this machine cannot give (one line: how to fix it)."""
    if isolation not in ("bubblewrap", "none"):
        raise invalid_request(f"unknown isolation {isolation!r}")
    if network not in ("own", "host"):
        raise invalid_request(f"unknown network {network!r}")
    problem = bwrap_problem() if isolation == "bubblewrap" else None
    if problem is not None:
        raise ProviderError(
            f"{problem}: {INSTALL_HINT}", kind=ISOLATION_UNAVAILABLE, retryable=False
        )
    if isolation == "bubblewrap" and network == "own":
        missing = netns.problem()
        if missing is not None:
            raise ProviderError(missing, kind=ISOLATION_UNAVAILABLE, retryable=False)


def check_binds(binds: Sequence[HostBind], uid: int | None = None) -> None:
    """Each bind exists, and the sandbox's own user (`uid`, a root worker's) may use it as
    asked: a folder it cannot enter would look empty or missing to the agent."""
    for bind in binds:
        if not os.path.exists(bind.path):
            raise worker_not_ready(f"binds: {bind.path} does not exist on this worker")
        if uid is None:
            continue
        found = os.stat(bind.path)
        need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(found.st_mode) else 0)
        need |= stat.S_IWOTH if bind.writable else 0
        if found.st_uid == uid:
            have = (found.st_mode >> 6) & 0o7
        elif found.st_gid == uid:
            have = (found.st_mode >> 3) & 0o7
        else:
            have = found.st_mode & 0o7
        if have & need != need:
            what = "read and write" if bind.writable else "read"
            raise worker_not_ready(
                f"{bind.path} (a bind, or the spec's local repo) is not one the sandbox's user "
                f"{uid} may {what}: let other users in (chmod o+{'rwx' if bind.writable else 'rx'}"
                f" {bind.path}) or run sandboxes as its owner "
                f"({SANDBOX_UIDS_ENV}={found.st_uid})"
            )


def sandbox_uid(run: str, environ: Mapping[str, str] | None = None) -> int | None:
    """The host user a sandbox of run `run` runs as, or None for the worker's own (a worker
    that is not root cannot change user)."""
    if os.geteuid() != 0:
        return None
    spec = (os.environ if environ is None else environ).get(SANDBOX_UIDS_ENV, "").strip()
    first, last = DEFAULT_SANDBOX_UIDS
    try:
        if spec:
            low, _, high = spec.partition("-")
            first, last = int(low), int(high or low)
    except ValueError:
        raise ProviderError(
            f"{SANDBOX_UIDS_ENV}={spec!r} is not a user id or a range first-last",
            kind="InvalidRequest",
            retryable=False,
        ) from None
    if not 0 < first <= last < 2**32 - 1:
        raise ProviderError(
            f"{SANDBOX_UIDS_ENV}: {first}-{last} must be users other than root",
            kind="InvalidRequest",
            retryable=False,
        )
    digest = int.from_bytes(hashlib.sha256(run.encode()).digest()[:8], "big")
    return first + digest % (last - first + 1)


def describe(meta: SandboxMeta) -> str:
    """What the sandbox isolates and limits, in one sentence for the status and the card."""
    if meta.isolation == "bubblewrap":
        who = f"as uid {meta.uid}, " if meta.uid is not None else ""
        text = (
            f"isolated (bubblewrap): {who}only /workspace writable, system folders read-only, "
            f"private /tmp and /run, own PIDs, {_network_words(meta)}"
        )
    else:
        text = (
            "not isolated (isolation: none): runs as the worker's user with the host writable "
            "and every process visible"
        )
    if meta.binds:
        shown = ", ".join(
            f"{b.path} ({'writable' if b.writable else 'read-only'})" for b in binds_of(meta)
        )
        text += f"; binds: {shown}"
    if meta.mounts:
        shown = ", ".join(
            f"{m['target']} ({'writable' if m.get('writable') else 'read-only'})"
            for m in meta.mounts
        )
        text += f"; the worker's: {shown}"
    limits = local_limits.describe(meta.limits, meta.vcpu, meta.memory_mib, meta.cgroup_limits)
    return f"{text}; {limits}{_processes_words(meta)}{_pause_words(meta)}"


def _network_words(meta: SandboxMeta) -> str:
    ports = ", ".join(str(port) for port in meta.host_ports)
    loopback = f", and the host's loopback on ports {ports} only" if ports else ""
    if meta.network == "gateway":
        names = meta.egress or []
        if meta.gateway_port is None:
            return f"own network, no route out (no gateway ran on this worker){loopback}"
        if names == ["*"]:
            return f"own network, no route out but the gateway (every public name){loopback}"
        allowed = ", ".join(names) if names else "no names"
        return f"own network, no route out but the gateway (to {allowed}){loopback}"
    if meta.network != "own":
        return "network shared"
    if not meta.host_ports:
        return "own network (outbound only, not the host's loopback)"
    ports = ", ".join(str(port) for port in meta.host_ports)
    return f"own network (outbound, and the host's loopback on ports {ports} only)"


def _processes_words(meta: SandboxMeta) -> str:
    if "pids" in meta.cgroup_limits:
        cap = next((s["pids.max"] for s in meta.cgroups.values() if "pids.max" in s), None)
        cap = cap or next((s["TasksMax"] for s in meta.cgroups.values() if "TasksMax" in s), "")
        return f"; at most {cap} processes (its cgroup)"
    if meta.uid is None or meta.limits == "none":
        return ""
    return f"; at most {max_processes()} processes"


_FREEZERS = {
    local_cgroups.CGROUP2: "cgroup v2",
    local_cgroups.CGROUP1: "cgroup v1 freezer",
    local_cgroups.SYSTEMD: "its systemd slice",
}


def _pause_words(meta: SandboxMeta) -> str:
    if meta.freezer in _FREEZERS:
        return f"; paused by freezing its cgroup ({_FREEZERS[meta.freezer]})"
    if meta.pause_ends_agents():
        why = f" ({meta.no_cgroup})" if meta.no_cgroup else ""
        return (
            f"; no cgroup here{why}: a pause ends its agents (files kept), and the run starts "
            "the agent again from its checkpoint"
        )
    return ""


def max_processes() -> int:
    """The process cap of a sandbox with a user of its own (the worker's setting, else
    `MAX_PROCESSES`)."""
    text = os.environ.get(SANDBOX_PROCESSES_ENV, "").strip()
    try:
        return max(1, int(text)) if text else MAX_PROCESSES
    except ValueError:
        raise ProviderError(
            f"{SANDBOX_PROCESSES_ENV}={text!r} is not a number of processes",
            kind="InvalidRequest",
            retryable=False,
        ) from None


def binds_of(meta: SandboxMeta) -> list[HostBind]:
    return [HostBind.model_validate(bind) for bind in meta.binds]


def wrap(
    folder: Path,
    state_home: Path,
    meta: SandboxMeta,
    command: str,
    cwd: str,
    env: Mapping[str, str],
    *,
    agent: bool,
) -> Wrapped:
    """How to run `command` in the sandbox at `folder` (its `SandboxMeta` is `meta`), in the
    sandbox directory `cwd`, with `env` as the sandbox sees it. The argv carries pipe
    placeholders (`ns.INFO_FD`, ...) for whoever starts it (`ns.Pipes`)."""
    # A cap of its cgroup's replaces the cap on its user's processes (which a kept sandbox
    # of the same run used up for the next one).
    capped = meta.uid is not None and "pids" not in meta.cgroup_limits
    processes = max_processes() if capped else None
    prefix = local_cgroups.join_prefix(list(meta.cgroups), meta.systemd_slice)
    prefix += local_limits.prefix(meta.limits, meta.vcpu, meta.memory_mib, processes=processes)
    if meta.isolation != "bubblewrap":
        workspace = WorkspaceMap(folder / "workspace")
        return Wrapped(
            argv=[*prefix, "bash", "-c", workspace.map_text(command)],
            cwd=str(workspace.host_path(cwd)),
            env=workspace.map_env(dict(env)),
        )
    own_network = meta.network in ("own", "gateway")
    inner = [shim_python(), "-I", "-S", SHIM_PATH]
    if meta.uid is not None:
        inner += ["--as", f"{meta.uid}:{meta.uid}"]
    pipes: list[str] = []
    if agent or own_network:
        pipes += ["--info-fd", INFO_FD]
    if own_network:
        pipes += ["--block-fd", BLOCK_FD]
    if agent:
        inner += ["--status", STATUS_FD]
    inner += ["--", command]
    mounts = bwrap_mounts(
        folder, state_home, binds_of(meta), SHIM, own_network=own_network, worker=meta.mounts
    )
    bwrap = shutil.which("bwrap") or "bwrap"
    flags = _flags(own_network=own_network, as_user=meta.uid is not None)
    argv = [*prefix, bwrap, *mounts, "--chdir", cwd, *flags, *pipes, "--", *inner]
    plan = _network_plan(meta) if own_network else None
    return Wrapped(argv=argv, cwd=str(folder), env=dict(env), network=plan)


def _network_plan(meta: SandboxMeta) -> dict[str, Any]:
    """What the launcher plugs into the sandbox's network namespace: relays to the worker's
    loopback on its `host_ports` (and the gateway's port), and slirp4netns's way out only
    for a sandbox made before the gateway."""
    ports = list(meta.host_ports)
    if meta.network == "gateway" and meta.gateway_port is not None:
        ports.append(meta.gateway_port)
    return {"host_ports": ports, "uid": meta.uid, "outbound": meta.network == "own"}


def _flags(*, own_network: bool, as_user: bool) -> list[str]:
    flags = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "sandbox"]
    flags += ["--die-with-parent", "--new-session"]
    if own_network:
        flags.append("--unshare-net")
    if os.geteuid() == 0:
        # As root bwrap keeps every capability (a remount could make the host writable): it
        # drops them all but, for a sandbox with its own user, the two `sandbox_init.py` needs to
        # become that user (and so lose them all) and the one to enter that user's folders
        # (`--chdir` happens before).
        flags += ["--cap-drop", "ALL"]
        if as_user:
            for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_DAC_READ_SEARCH"):
                flags += ["--cap-add", cap]
    else:
        # The worker's own user, in a user namespace that may not make another (bwrap 0.8+).
        flags.append("--unshare-user")
        if _bwrap_knows("--disable-userns"):
            flags.append("--disable-userns")
    return flags


_known_flags: dict[str, bool] = {}


def _bwrap_knows(flag: str) -> bool:
    if flag not in _known_flags:
        try:
            text = subprocess.run(
                [shutil.which("bwrap") or "bwrap", "--help"],
                capture_output=True,
                text=True,
                timeout=PROBE_SECONDS,
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            text = ""
        _known_flags[flag] = flag in text
    return _known_flags[flag]
