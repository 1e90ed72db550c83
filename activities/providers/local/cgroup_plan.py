"""Which cgroup a new local sandbox gets, and making it (cgroups says what is done with it).

Found from this process's mounts (`/proc/self/mountinfo`) and its own cgroups
(`/proc/self/cgroup`), never from fixed paths. Every sandbox's cgroups are under one parent,
`overnight/`, named from the sandbox (and its state folder, so two workers' homes on one
machine never share one):

- a worker running as root makes them itself: on the cgroup v2 hierarchy's top
  (`<v2>/overnight/<name>`: the one place a cgroup may be given memory and process
  controllers whatever runs beside it), and on each v1 hierarchy under its own cgroup
  (`<v1 freezer>/<own>/overnight/<name>`, so a limit on the worker also holds its sandboxes).
  The freezer is v2's where the host has one, else the v1 `freezer`; memory, processes and
  CPU are limited by v2's controllers where they are enabled there, else by v1's.
- a worker that is not root asks its user's systemd for a slice per sandbox
  (`overnight-<name>.slice`: the user manager's cgroups are delegated to the user, so it may
  freeze and kill them), limited with `MemoryMax`, `TasksMax` and `CPUQuota`; without that,
  a cgroup under its own one if that is delegated to it (frozen, not limited).
- elsewhere, none (`OVERNIGHT_SANDBOX_CGROUPS=none` asks for that): see cgroups.NONE.

The choice is probed once per process (a probe cgroup joined and removed), and again after
`RETRY_PROBE_SECONDS` when it found nothing.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from activities.providers.local import cgroups
from activities.providers.local.cgroups import CGROUP1, CGROUP2, NONE, SYSTEMD

CGROUPS_ENV = "OVERNIGHT_SANDBOX_CGROUPS"
CHOICES = ("auto", CGROUP2, CGROUP1, SYSTEMD, NONE)
PARENT = "overnight"
LIMITED = ("memory", "pids", "cpu")
PROBE_SECONDS = 10.0
RETRY_PROBE_SECONDS = 60.0
CPU_PERIOD = 100_000
# Limits a kernel may lack (no swap accounting): left out there, not refused.
OPTIONAL = ("memory.swap.max", "memory.memsw.limit_in_bytes")


@dataclass(frozen=True)
class Mount:
    fs: str  # "cgroup2" or "cgroup" (v1)
    point: str
    root: str
    controllers: frozenset[str]


@dataclass(frozen=True)
class Plan:
    """What a sandbox gets: its freezer (`cgroups` kinds), the freezer's cgroup, every cgroup
    a process of it joins with the limits written there, what they limit, and its systemd
    slice (the `systemd` kind). `why`: for `none`, why there is no cgroup."""

    freezer: str
    cgroup: str | None = None
    joins: dict[str, dict[str, str]] = field(default_factory=dict)
    limited: tuple[str, ...] = ()
    systemd_slice: str | None = None
    why: str = ""


@dataclass(frozen=True)
class _Layout:
    """Where sandbox cgroups go on this machine: the freezer's kind and parent folder, and
    for each limited controller the parent folder holding it."""

    freezer: str
    freezer_parent: str | None = None
    controllers: dict[str, tuple[str, str]] = field(default_factory=dict)  # name: (fs, parent)
    why: str = ""


_probed: tuple[float, str, _Layout] | None = None


def mounts(text: str | None = None) -> list[Mount]:
    """The cgroup hierarchies mounted here, from mountinfo lines such as
    `41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw`."""
    if text is None:
        text = Path("/proc/self/mountinfo").read_text()
    found = []
    for line in text.splitlines():
        before, _, after = line.partition(" - ")
        left, right = before.split(), after.split()
        if len(left) < 5 or len(right) < 3 or right[0] not in ("cgroup", "cgroup2"):
            continue
        point = left[4].replace("\\040", " ")
        options = frozenset(right[2].split(",")) if right[0] == "cgroup" else frozenset()
        found.append(Mount(right[0], point, left[3], options))
    return found


def own_path(mount: Mount, text: str | None = None) -> str:
    """This process's cgroup in `mount`'s hierarchy, as a path under the mount ("/" at its
    top), from `/proc/self/cgroup` lines `0::/path` (v2) or `4:memory:/path` (v1)."""
    if text is None:
        text = Path("/proc/self/cgroup").read_text()
    for line in text.splitlines():
        number, _, rest = line.partition(":")
        names, _, path = rest.partition(":")
        v2 = number == "0" and names == ""
        if (mount.fs == "cgroup2") != v2:
            continue
        if mount.fs == "cgroup" and not set(names.split(",")) & mount.controllers:
            continue
        # A mount of part of the hierarchy (a container's) shows its root as its top.
        root = mount.root.rstrip("/")
        if root and (path == root or path.startswith(root + "/")):
            path = path[len(root) :]
        elif root:
            path = "/"
        return path or "/"
    return "/"


def choice() -> str:
    text = os.environ.get(CGROUPS_ENV, "").strip() or "auto"
    if text not in CHOICES:
        raise ValueError(f"{CGROUPS_ENV}={text!r}: one of {', '.join(CHOICES)}")
    return text


def cgroup_name(sandbox: str, home: Path) -> str:
    """The sandbox's cgroup name: its own, and its home's (two homes may hold one name)."""
    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:8]
    return f"{sandbox}.{digest}"


def plan(sandbox: str, home: Path, *, vcpu: int, memory_mib: int, processes: int) -> Plan:
    """Make the new sandbox's cgroups (limits written) and say what it got."""
    layout = _layout()
    name = cgroup_name(sandbox, home)
    if layout.freezer == SYSTEMD:
        return _systemd_plan(name, vcpu=vcpu, memory_mib=memory_mib, processes=processes)
    if layout.freezer_parent is None:
        return Plan(NONE, why=layout.why)
    joins: dict[str, dict[str, str]] = {os.path.join(layout.freezer_parent, name): {}}
    limited = []
    for controller, (fs, parent) in layout.controllers.items():
        folder = os.path.join(parent, name)
        joins.setdefault(folder, {}).update(
            _settings(controller, fs, vcpu=vcpu, memory_mib=memory_mib, processes=processes)
        )
        limited.append(controller)
    freezer_dir = next(iter(joins))
    made = Plan(layout.freezer, freezer_dir, joins, tuple(limited))
    ensure(made.freezer, made.joins, made.systemd_slice)
    return made


def ensure(freezer: str, joins: dict[str, dict[str, str]], systemd_slice: str | None) -> None:
    """The sandbox's cgroups are there, limits written, before a process joins them: made
    again when gone (a reboot empties cgroupfs; `sandbox.json` outlives it)."""
    if freezer == SYSTEMD and systemd_slice is not None:
        folder = next(iter(joins), None)
        if folder is None or not os.path.isdir(folder):
            _start_slice(systemd_slice, joins.get(folder or "", {}))
        return
    for folder, settings in joins.items():
        if os.path.isdir(folder):
            continue
        _make_parent(os.path.dirname(folder))
        os.mkdir(folder)
        for name, value in settings.items():
            path = os.path.join(folder, name)
            if name in OPTIONAL and not os.path.exists(path):
                continue
            with open(path, "w") as out:
                out.write(value)


def discard(freezer: str, joins: dict[str, dict[str, str]], systemd_slice: str | None) -> bool:
    """Remove a sandbox's emptied cgroups (its slice, for systemd); True when none is left."""
    if freezer == SYSTEMD and systemd_slice is not None:
        _systemctl("stop", systemd_slice)
    return cgroups.remove(list(joins))


def _settings(
    controller: str, fs: str, *, vcpu: int, memory_mib: int, processes: int
) -> dict[str, str]:
    """The files a controller's limit is written to, in order (v1's memsw after the limit)."""
    size = str(memory_mib * 1024 * 1024)
    if controller == "pids":
        return {"pids.max": str(processes)}
    if controller == "memory":
        if fs == "cgroup2":
            return {"memory.max": size, "memory.swap.max": "0"}
        return {"memory.limit_in_bytes": size, "memory.memsw.limit_in_bytes": size}
    quota = str(vcpu * CPU_PERIOD)
    if fs == "cgroup2":
        return {"cpu.max": f"{quota} {CPU_PERIOD}"}
    return {"cpu.cfs_period_us": str(CPU_PERIOD), "cpu.cfs_quota_us": quota}


# ----- the layout, probed -----


def _layout() -> _Layout:
    global _probed
    now, wanted = time.monotonic(), choice()
    if _probed is not None and _probed[1] == wanted:
        found_at, _, layout = _probed
        if layout.freezer != NONE or now - found_at < RETRY_PROBE_SECONDS:
            return layout
    layout = _find_layout(wanted)
    _probed = (now, wanted, layout)
    return layout


def _find_layout(wanted: str) -> _Layout:
    if wanted == NONE:
        return _Layout(NONE, why=f"{CGROUPS_ENV}=none")
    try:
        found = mounts()
    except OSError as error:
        return _Layout(NONE, why=f"no cgroups here ({error})")
    root = os.geteuid() == 0
    tried: list[str] = []
    if wanted in ("auto", SYSTEMD) and not root:
        why = _systemd_problem(found)
        if why is None:
            return _Layout(SYSTEMD)
        tried.append(why)
    if wanted in ("auto", CGROUP2, CGROUP1):
        layout = _cgroupfs_layout(found, wanted, root, tried)
        if layout is not None:
            return layout
    return _Layout(NONE, why="; ".join(tried) or "no cgroup hierarchy is mounted here")


def _cgroupfs_layout(
    found: list[Mount], wanted: str, root: bool, tried: list[str]
) -> _Layout | None:
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
    return _Layout(freezer, freezer_parent, controllers)


def _parent(mount: Mount, *, top: bool) -> str:
    """Where overnight's cgroups go in `mount`'s hierarchy: under its top, or under this
    process's own cgroup."""
    own = "/" if top else own_path(mount)
    return os.path.normpath(os.path.join(mount.point, own.lstrip("/"), PARENT))


def _make_parent(parent: str) -> None:
    if not os.path.isdir(parent):
        os.makedirs(parent, exist_ok=True)
        # A v2 parent gives its children the controllers it was given (after a reboot too).
        if os.path.exists(os.path.join(parent, "cgroup.freeze")) and os.geteuid() == 0:
            _enable_v2(parent)


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


# ----- systemd (a worker that is not root) -----


def _systemctl(*args: str) -> subprocess.CompletedProcess[str]:
    user = [] if os.geteuid() == 0 else ["--user"]
    return subprocess.run(
        ["systemctl", *user, *args], capture_output=True, text=True, timeout=PROBE_SECONDS
    )


def _systemd_problem(found: list[Mount]) -> str | None:
    if not os.path.isdir("/run/systemd/system"):
        return "systemd is not this machine's init"
    if not any(m.fs == "cgroup2" for m in found):
        return "systemd has no cgroup v2 hierarchy here"
    slice_name = f"{PARENT}-probe{os.getpid()}.slice"
    try:
        if _systemctl("start", slice_name).returncode != 0:
            return "the user's systemd cannot start a slice (no user manager or bus)"
        folder = _slice_folder(slice_name, found)
        if folder is None or not os.access(os.path.join(folder, "cgroup.freeze"), os.W_OK):
            return "the user's systemd slices are not delegated to the user"
        return None
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"systemctl failed ({error})"
    finally:
        try:
            _systemctl("stop", slice_name)
        except (OSError, subprocess.TimeoutExpired):
            pass


def _slice_folder(slice_name: str, found: list[Mount] | None = None) -> str | None:
    shown = _systemctl("show", "-p", "ControlGroup", "--value", slice_name).stdout.strip()
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


def _systemd_plan(name: str, *, vcpu: int, memory_mib: int, processes: int) -> Plan:
    unit = slice_name(name)
    properties = {
        "MemoryMax": f"{memory_mib}M",
        "MemorySwapMax": "0",
        "TasksMax": str(processes),
        "CPUQuota": f"{vcpu * 100}%",
    }
    folder, limited = _start_slice(unit, properties)
    if folder is None:
        return Plan(NONE, why=f"systemd could not make the slice {unit}")
    return Plan(SYSTEMD, folder, {folder: properties}, LIMITED if limited else (), unit)


def _start_slice(unit: str, properties: dict[str, str]) -> tuple[str | None, bool]:
    """Start the slice with its limits (again, after a reboot): its cgroup folder, and
    whether systemd took the limits (a user manager given no memory controller refuses)."""
    try:
        if _systemctl("start", unit).returncode != 0:
            return None, False
        pairs = [f"{key}={value}" for key, value in properties.items()]
        limited = _systemctl("set-property", "--runtime", unit, *pairs).returncode == 0
        return _slice_folder(unit), limited
    except (OSError, subprocess.TimeoutExpired):
        return None, False
