"""What a reap did, one entry per thing it took (a sandbox stopped or let go of, a snapshot,
a trash entry, a workspace's ref, a session store, a gateway book), and how a let-go reads:
shared by the reap (overnight.worker.reaping), its schedule and the CLI's text."""

from __future__ import annotations

from pydantic import BaseModel


class ReapedSandbox(BaseModel):
    provider: str
    # A sandbox id, a snapshot id (`kind == "snapshot"`) or a trash entry (`kind == "trash"`).
    sandbox_id: str
    run_id: str
    was: str
    # Done: the sandbox stopped (deleted), the snapshot or trash entry deleted.
    stopped: bool
    detail: str = ""
    kind: str = "sandbox"
    # Why reap took it.
    why: str = ""
    # The bytes this freed on this machine's disk (local sandboxes, snapshots and trash).
    freed_bytes: int | None = None
    # `kind == "released"`: what a kept sandbox let go of on this host (it is kept).
    processes: int | None = None
    memory_bytes: int | None = None
    mounts: int | None = None


def released_line(entry: ReapedSandbox) -> str:
    """A kept sandbox that let go of what it held on this host (it stays, its files only)."""
    of = f" of {entry.run_id}" if entry.run_id else ""
    head = f"{entry.provider} sandbox {entry.sandbox_id}{of}"
    if not entry.stopped:
        return f"{head}: could not let go of its processes ({entry.detail}): {entry.why}"
    held = []
    if entry.processes:
        plural = "es" if entry.processes != 1 else ""
        memory = (entry.memory_bytes or 0) / (1024 * 1024)
        held.append(f"{entry.processes} host process{plural} ({memory:.1f} MiB of memory)")
    if entry.mounts:
        held.append(f"{entry.mounts} mount{'s' if entry.mounts != 1 else ''}")
    return (
        f"{head}: let go of {' and '.join(held) or 'nothing'}: {entry.why}; kept, its files "
        "only (mounted again when read)"
    )
