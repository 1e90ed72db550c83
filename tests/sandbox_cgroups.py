"""The cgroups of the sandboxes a test session made go with the session.

Tests often leave sandboxes unstopped: their folders go with the temporary folders, but a
cgroup is the kernel's and outlives them. At the session's end every sandbox found under its
temporary folder has its cgroups killed (what a test left running in them) and removed.
"""

from __future__ import annotations

import json
from pathlib import Path

from activities.providers.local import cgroup_plan, cgroups

# Homes sit a few folders down the session's temporary folder (tmp_path / "home", ...).
DEPTHS = range(1, 5)


def release_under(root: Path) -> int:
    """Kill and remove the cgroups of every sandbox under `root`; how many sandboxes had any."""
    released = 0
    for depth in DEPTHS:
        for path in root.glob("/".join(["*"] * depth) + "/sandboxes/*/sandbox.json"):
            try:
                meta = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            joins, freezer = meta.get("cgroups") or {}, meta.get("freezer", "")
            if not joins:
                continue
            if freezer in cgroups.FROZEN_KINDS and meta.get("cgroup"):
                cgroups.kill(freezer, meta["cgroup"], list(joins))
            cgroup_plan.discard(freezer, joins, meta.get("systemd_slice"))
            released += 1
    return released
