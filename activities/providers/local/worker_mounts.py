"""The worker's own folders in a local isolated sandbox (`SandboxRequest.mounts`): a coding
agent's CLI install and the agent kit read-only, a run's session store writable.

Checked and recorded when the sandbox is made (its `SandboxMeta.mounts`, so any worker mounts
the same in every later command), and turned into bubblewrap arguments by `mounts`. A target
is a folder under `/overnight/`, a top-level folder of the sandbox's own root (an empty tmpfs,
root's): nothing of the host is covered, and the sandbox's user cannot rename or replace what
is mounted there. bubblewrap run as root makes the folders it creates on the way 0700, which
that user could not cross: each parent is made 0755 first (`--perms 0755 --dir`).

Read-only folders must be readable by every user (the installer makes the CLIs so). A writable
one is a store of the run's (its session store), held inside the sandbox's disk limit: an
image of its own carved out of `disk_mib`, or measured with the sandbox (run_store); the
folder bound is the store's, owned by the sandbox's user and private to it (0700). No folder
of the host is ever bound writable unlimited.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from activities.providers.local import run_store
from activities.providers.local.disk_limit import DiskPlan
from activities.providers.local.state import invalid_request, worker_not_ready
from activities.providers.protocol import WorkerMount

ROOT = "/overnight"
MAX_MOUNTS = 8


def prepare(
    mounts: Sequence[WorkerMount], uid: int | None, plan: DiskPlan, trash: Path
) -> list[dict[str, Any]]:
    """`mounts` as the sandbox's record keeps them (sources resolved, links followed), made
    ready: InvalidRequest for a target outside `/overnight/` or a read-only source missing;
    a writable one is a run's store, limited by the sandbox's disk `plan` (run_store)."""
    if len(mounts) > MAX_MOUNTS:
        raise invalid_request(f"at most {MAX_MOUNTS} worker mounts (got {len(mounts)})")
    recorded: list[dict[str, Any]] = []
    targets: set[str] = set()
    for mount in mounts:
        target = posixpath.normpath(mount.target)
        if not target.startswith(ROOT + "/") or target != mount.target or target in targets:
            raise invalid_request(f"worker mount {mount.target!r}: not a folder under {ROOT}/")
        targets.add(target)
        if not os.path.isabs(mount.source):
            raise invalid_request(f"worker mount {mount.source!r}: not an absolute path")
        if mount.writable:
            store = run_store.prepare(Path(mount.source), plan, uid, trash)
            recorded.append({**store, "target": target, "writable": True})
            continue
        if not os.path.isdir(mount.source):
            raise worker_not_ready(f"worker mount {mount.source}: no such folder on this worker")
        source = os.path.realpath(mount.source)
        recorded.append({"source": source, "target": target, "writable": False})
    return recorded


def bwrap_args(recorded: Sequence[Mapping[str, Any]]) -> list[str]:
    """bubblewrap's arguments for the recorded mounts, parents first."""
    args: list[str] = []
    made: set[str] = set()
    for mount in sorted(recorded, key=lambda m: str(m["target"]).count("/")):
        target = str(mount["target"])
        parent = posixpath.dirname(target)
        chain = []
        while parent not in ("/", "") and parent not in made:
            chain.append(parent)
            parent = posixpath.dirname(parent)
        for folder in reversed(chain):
            args += ["--perms", "0755", "--dir", folder]
            made.add(folder)
        args += ["--bind" if mount.get("writable") else "--ro-bind", str(mount["source"]), target]
        made.add(target)
    return args
