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
a while when it found nothing: cgroup_layout (with cgroup_mounts, what is mounted here, and
cgroup_systemd, the slices). This module makes a sandbox's cgroups from that layout.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from activities.providers.local import cgroup_layout, cgroup_systemd, cgroups
from activities.providers.local.cgroup_layout import LIMITED
from activities.providers.local.cgroups import NONE, SYSTEMD

CPU_PERIOD = 100_000
# Limits a kernel may lack (no swap accounting): left out there, not refused.
OPTIONAL = ("memory.swap.max", "memory.memsw.limit_in_bytes")


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


def cgroup_name(sandbox: str, home: Path) -> str:
    """The sandbox's cgroup name: its own, and its home's (two homes may hold one name)."""
    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:8]
    return f"{sandbox}.{digest}"


def plan(sandbox: str, home: Path, *, vcpu: int, memory_mib: int, processes: int) -> Plan:
    """Make the new sandbox's cgroups (limits written) and say what it got."""
    layout = cgroup_layout.layout()
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
            cgroup_systemd.start_slice(systemd_slice, joins.get(folder or "", {}))
        return
    for folder, settings in joins.items():
        if os.path.isdir(folder):
            continue
        cgroup_layout.make_parent(os.path.dirname(folder))
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
        cgroup_systemd.stop_slice(systemd_slice)
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


def _systemd_plan(name: str, *, vcpu: int, memory_mib: int, processes: int) -> Plan:
    unit = cgroup_systemd.slice_name(name)
    properties = {
        "MemoryMax": f"{memory_mib}M",
        "MemorySwapMax": "0",
        "TasksMax": str(processes),
        "CPUQuota": f"{vcpu * 100}%",
    }
    folder, limited = cgroup_systemd.start_slice(unit, properties)
    if folder is None:
        return Plan(NONE, why=f"systemd could not make the slice {unit}")
    return Plan(SYSTEMD, folder, {folder: properties}, LIMITED if limited else (), unit)
