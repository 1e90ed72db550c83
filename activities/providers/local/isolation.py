"""How a local sandbox's processes are isolated: bubblewrap, or (asked for) nothing at all.

With `isolation="bubblewrap"` every agent and command of a sandbox runs under `bwrap`:

- the sandbox's `workspace/` mounted at the real path `/workspace` (no rewriting of commands,
  paths or variables), its `home/` at its own path as `$HOME`, its `tmp/` as `/tmp` and
  `/var/tmp` (private, and kept for the sandbox's life);
- the rest of the host read-only, overnight's state folder hidden (other sandboxes, the dev
  server's database), and only the spec's `binds` on top, read-only unless asked writable;
- a PID namespace of its own (it sees only its own processes; killing the namespace's PID 1
  kills them all, `setsid` daemons too), all capabilities dropped, the network shared.

With `isolation="none"` processes run on the host as the worker's user, and `/workspace` is
rewritten to the sandbox's folder in commands and variables (`local_files.WorkspaceMap`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from activities.providers.local import inside as local_inside
from activities.providers.local import limits as local_limits
from activities.providers.local.files import WORKSPACE, WorkspaceMap
from activities.providers.local.ns import INFO_FD, STATUS_FD
from activities.providers.local.state import SandboxMeta, invalid_request
from activities.providers.protocol import ProviderError
from overnight.isolation import HostBind, is_under

ISOLATION_UNAVAILABLE = "IsolationUnavailable"
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: sudo apt-get install bubblewrap; Fedora: sudo dnf "
    'install bubblewrap) or set "isolation": "none" in the spec to run without isolation'
)
SHIM = Path(local_inside.__file__)
PROBE_SECONDS = 10.0
RETRY_PROBE_SECONDS = 30.0
_probed: tuple[float, str | None] | None = None


@dataclass(frozen=True)
class Wrapped:
    """A sandbox command ready for `Popen`: its argv, where it starts on the host, its env."""

    argv: list[str]
    cwd: str
    env: dict[str, str]


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
    probe = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        *_flags(),
        "--",
        "true",
    ]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=PROBE_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap cannot make a sandbox here ({error})"
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return f"bwrap cannot make a sandbox here ({why}; are user namespaces allowed?)"
    return None


def require(isolation: str) -> None:
    """Refuse a sandbox whose isolation this machine cannot give (one line: how to fix it)."""
    if isolation not in ("bubblewrap", "none"):
        raise invalid_request(f"unknown isolation {isolation!r}")
    problem = bwrap_problem() if isolation == "bubblewrap" else None
    if problem is not None:
        raise ProviderError(
            f"{problem}: {INSTALL_HINT}", kind=ISOLATION_UNAVAILABLE, retryable=False
        )


def check_binds(binds: Sequence[HostBind]) -> None:
    for bind in binds:
        if not os.path.exists(bind.path):
            raise invalid_request(f"binds: {bind.path} does not exist on this worker")


def describe(meta: SandboxMeta) -> str:
    """What the sandbox isolates and limits, in one sentence for the status and the card."""
    if meta.isolation == "bubblewrap":
        text = (
            "isolated (bubblewrap): only /workspace writable, host read-only, private /tmp, "
            "own PIDs, network shared"
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
    return f"{text}; {local_limits.describe(meta.limits, meta.vcpu, meta.memory_mib)}"


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
    sandbox directory `cwd`, with `env` as the sandbox sees it. An agent's argv carries the
    INFO_FD and STATUS_FD placeholders for the launcher."""
    prefix = local_limits.prefix(meta.limits, meta.vcpu, meta.memory_mib)
    if meta.isolation != "bubblewrap":
        workspace = WorkspaceMap(folder / "workspace")
        return Wrapped(
            argv=[*prefix, "bash", "-c", workspace.map_text(command)],
            cwd=str(workspace.host_path(cwd)),
            env=workspace.map_env(dict(env)),
        )
    binds = binds_of(meta)
    if agent:
        inner = [sys.executable, "-I", "-S", str(SHIM), STATUS_FD, command]
        info = ["--info-fd", INFO_FD]
    else:
        inner, info = ["bash", "-c", command], []
    mounts = bwrap_mounts(folder, state_home, binds, [sys.executable, str(SHIM)])
    bwrap = shutil.which("bwrap") or "bwrap"
    argv = [*prefix, bwrap, *mounts, "--chdir", cwd, *_flags(), *info, "--", *inner]
    return Wrapped(argv=argv, cwd=str(folder), env=dict(env))


def _flags() -> list[str]:
    # As root bwrap keeps every capability (a remount could make the host writable): drop them.
    root = ["--cap-drop", "ALL"] if os.geteuid() == 0 else []
    return ["--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session", *root]


def bwrap_mounts(
    folder: Path, state_home: Path, binds: Sequence[HostBind], needed: Sequence[str]
) -> list[str]:
    """bwrap's mount arguments, in order (a later mount covers an earlier one)."""
    args: list[str] = []
    for entry in sorted(os.scandir("/"), key=lambda e: e.name):
        target = "/" + entry.name
        if target in ("/proc", "/dev", "/tmp", WORKSPACE):
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(target), target]
        else:
            args += ["--ro-bind", target, target]
    tmp = str(folder / "tmp")
    os.makedirs(tmp, exist_ok=True)
    args += ["--dev", "/dev", "--proc", "/proc", "--bind", tmp, "/tmp"]
    if os.path.isdir("/var/tmp") and not os.path.islink("/var/tmp"):
        args += ["--bind", tmp, "/var/tmp"]
    hidden = ["/tmp", "/var/tmp", "/proc", "/dev", WORKSPACE]
    home = str(state_home.resolve())
    if home != "/" and not is_under(home, hidden) and os.path.isdir(home):
        args += ["--tmpfs", home]  # other sandboxes and overnight's own state stay unseen
        hidden.append(home)
    for path in needed:  # the interpreter and the shim, wherever they are
        for source in {os.path.dirname(path), sys.base_prefix, os.path.realpath(path)}:
            if is_under(source, hidden):
                args += ["--ro-bind", source, source]
    for bind in sorted(binds, key=lambda b: b.path.count("/")):
        args += ["--bind" if bind.writable else "--ro-bind", bind.path, bind.path]
    own_home = str(folder / "home")
    args += ["--bind", own_home, own_home, "--bind", str(folder / "workspace"), WORKSPACE]
    return args
