"""The cgroup hierarchies mounted on this machine, and this process's cgroup in each: read
from `/proc/self/mountinfo` and `/proc/self/cgroup`, never assumed from fixed paths (a hybrid
host, a pure v2 one and a container's part of a hierarchy all look different)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# The folder every sandbox cgroup is under, in each hierarchy (and the prefix of their
# systemd slices).
PARENT = "overnight"


@dataclass(frozen=True)
class Mount:
    fs: str  # "cgroup2" or "cgroup" (v1)
    point: str
    root: str
    controllers: frozenset[str]


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
