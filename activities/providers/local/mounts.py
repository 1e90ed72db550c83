"""What an isolated local sandbox sees of the host: bubblewrap's mount arguments.

Only what agents need, read-only: the system folders (`SYSTEM_DIRS`: programs, libraries,
`/etc`), the Python that runs `sandbox_init.py`, and the spec's binds. Never the rest: no home
folder (`/home`, `/root`, the worker's `$HOME`), no `/run` or `/var` of the host (their Unix
sockets: D-Bus, systemd, docker), no `/mnt`, `/srv`, `/media`, no overnight state (other
sandboxes, the dev server's database), no overnight venv (its `temporal` CLI). Private:
`/tmp` and `/var/tmp` (the sandbox's `tmp/`), `/run` (empty). `/proc` is the sandbox's own
(its PID namespace) with `/proc/sys` and the other kernel knobs read-only; `/dev` holds only
the harmless devices.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from activities.providers.local import worker_mounts
from activities.providers.local.files import WORKSPACE
from overnight.core.isolation import HostBind, is_under

# Top-level host folders a sandbox sees, read-only (symlinks among them, as on merged-/usr
# systems, are kept as symlinks). `/nix` holds the programs of Nix users.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
OPTIONAL_DIRS = ("/nix",)
# Kernel knobs under /proc that must stay read-only even for a process that could write them.
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")
# Where `sandbox_init.py` is shown in a sandbox (the overnight package itself is not).
SHIM_PATH = "/run/overnight/sandbox_init.py"
RESOLV_CONF = "resolv.conf"
# Where an isolated sandbox's `home/` is shown, as its `$HOME` (no host path in sight).
SANDBOX_HOME = "/home/sandbox"


def bwrap_mounts(
    folder: Path,
    state_home: Path,
    binds: Sequence[HostBind],
    shim: Path,
    *,
    own_network: bool,
    worker: Sequence[Mapping[str, Any]] = (),
) -> list[str]:
    """bwrap's mount arguments, in order (a later mount covers an earlier one)."""
    args: list[str] = []
    for target in (*SYSTEM_DIRS, *OPTIONAL_DIRS):
        if os.path.islink(target):
            args += ["--symlink", os.readlink(target), target]
        elif os.path.isdir(target):
            args += ["--ro-bind", target, target]
    home = str(state_home.resolve())
    if is_under(home, SYSTEM_DIRS):
        args += ["--tmpfs", home]  # other sandboxes and overnight's own state stay unseen
    if own_network:
        # slirp4netns answers DNS inside; the host's resolver may sit on its loopback.
        args += ["--ro-bind", str(folder / RESOLV_CONF), "/etc/resolv.conf"]
    args += ["--dev", "/dev", "--proc", "/proc"]
    for knob in PROC_READ_ONLY:
        if os.path.exists(f"/proc/{knob}"):
            args += ["--ro-bind-try", f"/proc/{knob}", f"/proc/{knob}"]
    tmp = str(folder / "tmp")
    os.makedirs(tmp, exist_ok=True)
    args += ["--tmpfs", "/run", "--bind", tmp, "/tmp", "--dir", "/var", "--bind", tmp, "/var/tmp"]
    args += ["--symlink", "/run", "/var/run"]
    for source in python_folders():
        if not is_under(source, SYSTEM_DIRS):
            args += [*_open_parents(source), "--ro-bind", source, source]
    args += ["--ro-bind", str(shim), SHIM_PATH]
    for bind in sorted(binds, key=lambda b: b.path.count("/")):
        kind = "--bind" if bind.writable else "--ro-bind"
        args += [*_open_parents(bind.path), kind, bind.path, bind.path]
    args += worker_mounts.bwrap_args(worker)  # under /overnight/ (activities.coding_agent.setup)
    args += [*_open_parents(SANDBOX_HOME), "--bind", str(folder / "home"), SANDBOX_HOME]
    args += ["--bind", str(folder / "workspace"), WORKSPACE]
    return args


def _open_parents(path: str) -> list[str]:
    """bwrap makes the folders above a mount private to root: the sandbox's user must pass
    through them (they hold nothing else: the sandbox's root is an empty tmpfs)."""
    args: list[str] = []
    parent = os.path.dirname(os.path.normpath(path))
    ancestors = []
    while parent not in ("/", ""):
        ancestors.append(parent)
        parent = os.path.dirname(parent)
    for folder in reversed(ancestors):
        if not is_under(folder, SYSTEM_DIRS):
            args += ["--perms", "0755", "--dir", folder]
    return args


def shim_python() -> str:
    """The interpreter that runs `sandbox_init.py`: the worker's, without its venv."""
    return os.path.realpath(sys.executable)


def python_folders() -> list[str]:
    """What the shim's interpreter needs: its installation (the stdlib), read-only. The
    worker's venv is not among them: its site-packages and scripts stay on the host."""
    folders = [sys.base_prefix]
    here = os.path.dirname(shim_python())
    if not is_under(here, [sys.base_prefix]):
        folders.append(here)
    return folders
