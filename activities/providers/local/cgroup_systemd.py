"""Sandbox cgroups from the user's systemd, for a worker that is not root: a slice per
sandbox (`overnight-<name>.slice`), whose cgroup the user's manager delegates to the user, so
the worker may freeze and kill it; limited by the slice's properties. See cgroup_plan."""

from __future__ import annotations

import os
import subprocess

from activities.providers.local.cgroup_mounts import PARENT, Mount, mounts

# How long one systemctl call may take (a user manager that does not answer is none).
SYSTEMCTL_SECONDS = 10.0


def systemctl(*args: str) -> subprocess.CompletedProcess[str]:
    user = [] if os.geteuid() == 0 else ["--user"]
    return subprocess.run(
        ["systemctl", *user, *args], capture_output=True, text=True, timeout=SYSTEMCTL_SECONDS
    )


def problem(found: list[Mount]) -> str | None:
    """Why the user's systemd cannot give sandboxes slices (a probe slice is started, looked
    at and stopped), or None when it can."""
    if not os.path.isdir("/run/systemd/system"):
        return "systemd is not this machine's init"
    if not any(m.fs == "cgroup2" for m in found):
        return "systemd has no cgroup v2 hierarchy here"
    slice_name = f"{PARENT}-probe{os.getpid()}.slice"
    try:
        if systemctl("start", slice_name).returncode != 0:
            return "the user's systemd cannot start a slice (no user manager or bus)"
        folder = slice_folder(slice_name, found)
        if folder is None or not os.access(os.path.join(folder, "cgroup.freeze"), os.W_OK):
            return "the user's systemd slices are not delegated to the user"
        return None
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"systemctl failed ({error})"
    finally:
        try:
            systemctl("stop", slice_name)
        except (OSError, subprocess.TimeoutExpired):
            pass


def slice_folder(slice_name: str, found: list[Mount] | None = None) -> str | None:
    shown = systemctl("show", "-p", "ControlGroup", "--value", slice_name).stdout.strip()
    v2 = next((m for m in (found or mounts()) if m.fs == "cgroup2"), None)
    if not shown or v2 is None:
        return None
    return os.path.join(v2.point, shown.lstrip("/"))


def slice_name(name: str) -> str:
    """`overnight-<name>.slice`, escaped as systemd does (a `-` in a slice name nests it)."""
    escaped = "".join(
        c if c.isascii() and (c.isalnum() or c in ":_.") else f"\\x{ord(c):02x}" for c in name
    )
    return f"{PARENT}-{escaped}.slice"


def start_slice(unit: str, properties: dict[str, str]) -> tuple[str | None, bool]:
    """Start the slice with its limits (again, after a reboot): its cgroup folder, and
    whether systemd took the limits (a user manager given no memory controller refuses)."""
    try:
        if systemctl("start", unit).returncode != 0:
            return None, False
        pairs = [f"{key}={value}" for key, value in properties.items()]
        limited = systemctl("set-property", "--runtime", unit, *pairs).returncode == 0
        return slice_folder(unit), limited
    except (OSError, subprocess.TimeoutExpired):
        return None, False


def stop_slice(unit: str) -> None:
    """Stop the slice (systemd removes its emptied cgroup)."""
    systemctl("stop", unit)
