"""Where sandbox cgroups go on this machine, probed once per process: the freezer's kind and
parent folder, and where each limited controller is (see cgroup_plan for the rules).

A probe makes a cgroup where sandboxes' would go, has a short process join it and removes it;
a layout that found nothing is probed again after `RETRY_PROBE_SECONDS` (a user manager or a
delegation may come later), one that found a freezer is kept.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from activities.providers.local import cgroup_systemd, cgroups
from activities.providers.local.cgroup_mounts import PARENT, Mount, mounts, own_path
from activities.providers.local.cgroups import CGROUP1, CGROUP2, NONE, SYSTEMD

CGROUPS_ENV = "OVERNIGHT_SANDBOX_CGROUPS"
CHOICES = ("auto", CGROUP2, CGROUP1, SYSTEMD, NONE)
LIMITED = ("memory", "pids", "cpu")
PROBE_SECONDS = 10.0
RETRY_PROBE_SECONDS = 60.0


@dataclass(frozen=True)
class Layout:
    """Where sandbox cgroups go on this machine: the freezer's kind and parent folder, and
    for each limited controller the parent folder holding it."""

    freezer: str
    freezer_parent: str | None = None
    controllers: dict[str, tuple[str, str]] = field(default_factory=dict)  # name: (fs, parent)
    why: str = ""


_probed: tuple[float, str, Layout] | None = None


def choice() -> str:
    text = os.environ.get(CGROUPS_ENV, "").strip() or "auto"
    if text not in CHOICES:
        raise ValueError(f"{CGROUPS_ENV}={text!r}: one of {', '.join(CHOICES)}")
    return text


def layout() -> Layout:
    """This machine's layout for the worker's choice, probed at most once (see above)."""
    global _probed
    now, wanted = time.monotonic(), choice()
    if _probed is not None and _probed[1] == wanted:
        found_at, _, found = _probed
        if found.freezer != NONE or now - found_at < RETRY_PROBE_SECONDS:
            return found
    found = _find_layout(wanted)
    _probed = (now, wanted, found)
    return found


def make_parent(parent: str) -> None:
    """The parent folder of sandbox cgroups, made again where it is gone (a reboot)."""
    if not os.path.isdir(parent):
        os.makedirs(parent, exist_ok=True)
        # A v2 parent gives its children the controllers it was given (after a reboot too).
        if os.path.exists(os.path.join(parent, "cgroup.freeze")) and os.geteuid() == 0:
            _enable_v2(parent)


def _find_layout(wanted: str) -> Layout:
    if wanted == NONE:
        return Layout(NONE, why=f"{CGROUPS_ENV}=none")
    try:
        found = mounts()
    except OSError as error:
        return Layout(NONE, why=f"no cgroups here ({error})")
    root = os.geteuid() == 0
    tried: list[str] = []
    if wanted in ("auto", SYSTEMD) and not root:
        why = cgroup_systemd.problem(found)
        if why is None:
            return Layout(SYSTEMD)
        tried.append(why)
    if wanted in ("auto", CGROUP2, CGROUP1):
        cgroupfs = _cgroupfs_layout(found, wanted, root, tried)
        if cgroupfs is not None:
            return cgroupfs
    return Layout(NONE, why="; ".join(tried) or "no cgroup hierarchy is mounted here")


def _cgroupfs_layout(
    found: list[Mount], wanted: str, root: bool, tried: list[str]
) -> Layout | None:
    v2 = next((m for m in found if m.fs == "cgroup2"), None)
    v1 = {c: m for m in found if m.fs == "cgroup" for c in m.controllers}
    freezer, freezer_parent = None, None
    if v2 is not None and wanted in ("auto", CGROUP2):
        parent = _parent(v2, top=root)
        why = _probe(parent, need="cgroup.freeze")
        if why is None:
            freezer, freezer_parent = CGROUP2, parent
        else:
            tried.append(f"cgroup v2 at {v2.point}: {why}")
    if freezer is None and "freezer" in v1 and wanted in ("auto", CGROUP1):
        parent = _parent(v1["freezer"], top=False)
        why = _probe(parent, need="freezer.state")
        if why is None:
            freezer, freezer_parent = CGROUP1, parent
        else:
            tried.append(f"cgroup v1 freezer at {v1['freezer'].point}: {why}")
    if freezer is None or freezer_parent is None:
        if v2 is None and "freezer" not in v1:
            tried.append("no cgroup freezer is mounted here")
        return None
    controllers: dict[str, tuple[str, str]] = {}
    if freezer == CGROUP2 and root:
        for name in _enable_v2(freezer_parent):
            controllers[name] = ("cgroup2", freezer_parent)
    for name in LIMITED:
        if name not in controllers and name in v1 and root:
            parent = _parent(v1[name], top=False)
            if _probe(parent, need=None) is None:
                controllers[name] = ("cgroup", parent)
    return Layout(freezer, freezer_parent, controllers)


def _parent(mount: Mount, *, top: bool) -> str:
    """Where overnight's cgroups go in `mount`'s hierarchy: under its top, or under this
    process's own cgroup."""
    own = "/" if top else own_path(mount)
    return os.path.normpath(os.path.join(mount.point, own.lstrip("/"), PARENT))


def _probe(parent: str, *, need: str | None) -> str | None:
    """Why sandbox cgroups cannot be made under `parent` (a probe cgroup is made, joined by a
    short process and removed), or None when they can."""
    probe = os.path.join(parent, f"probe-{uuid.uuid4().hex[:12]}")
    try:
        os.makedirs(parent, exist_ok=True)
        os.mkdir(probe)
    except OSError as error:
        return f"cannot make a cgroup there ({error.strerror})"
    try:
        if need is not None and not os.path.exists(os.path.join(probe, need)):
            return f"no {need}"
        try:
            done = subprocess.run(
                [*cgroups.join_prefix([probe]), "true"],
                capture_output=True,
                text=True,
                timeout=PROBE_SECONDS,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"cannot join a cgroup there ({error})"
        if done.returncode != 0:
            return f"cannot join a cgroup there ({done.stderr.strip() or done.returncode})"
        return None
    finally:
        cgroups.remove([probe])


def _enable_v2(parent: str) -> list[str]:
    """Give `parent`'s children the memory, pids and cpu controllers of v2 where its own
    parent has them to give (never where that would move a process: the kernel refuses)."""
    above = os.path.dirname(parent)
    enabled = []
    available = _words(os.path.join(above, "cgroup.controllers"))
    for name in LIMITED:
        if name not in available:
            continue
        try:
            if name not in _words(os.path.join(above, "cgroup.subtree_control")):
                _append(os.path.join(above, "cgroup.subtree_control"), f"+{name}")
            _append(os.path.join(parent, "cgroup.subtree_control"), f"+{name}")
        except OSError:
            continue
        enabled.append(name)
    return enabled


def _words(path: str) -> list[str]:
    try:
        return Path(path).read_text().split()
    except OSError:
        return []


def _append(path: str, text: str) -> None:
    with open(path, "w") as out:
        out.write(text)
