"""`overnight disk`: what local sandboxes and snapshots hold on this machine's disk.

Read from the files under `$OVERNIGHT_HOME` alone (no Temporal server, no worker needed), so a
user sees it before the disk is full: each sandbox still holding its files (running or
paused, with when its retention ends, and what a paused one holds on the host beside them:
processes, memory, mounts, and why), what deleted ones keep (their records and last words),
the snapshots, what a killed process left half deleted, and the room left on the filesystem.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from activities.providers.disk import DiskUsage, HostHeld, SandboxDisk
from activities.providers.registry import disk_for, open_configured
from overnight.cli.commands import Command
from overnight.cli.help_texts import JSON_HELP
from overnight.cli.render import size_text
from overnight.core.constants import LABEL_ATTEMPT, LABEL_KEEP_UNTIL, LABEL_RUN
from overnight.core.retention import parse_label


def _arguments(disk: argparse.ArgumentParser) -> None:
    disk.add_argument("--json", action="store_true", help=JSON_HELP)


async def run(args: argparse.Namespace) -> int:
    async with open_configured() as providers:
        accounts = {name: disk_for(p) for name, p in providers.items()}
        usages = {name: await a.usage() for name, a in accounts.items() if a is not None}
    if args.json:
        print(json.dumps({name: _json(usage) for name, usage in usages.items()}, indent=2))
    else:
        print("\n".join(text(usage) for usage in usages.values()))
    return 0


def text(usage: DiskUsage) -> str:
    held = [s for s in usage.sandboxes if s.deleted_at is None]
    gone = [s for s in usage.sandboxes if s.deleted_at is not None]
    states = ", ".join(
        f"{sum(s.state == state for s in held)} {state}"
        for state in ("running", "paused", "stopped")
        if any(s.state == state for s in held)
    )
    lines = [
        f"overnight's local disk: {usage.root} (its filesystem has "
        f"{size_text(usage.free_bytes)} free of {size_text(usage.total_bytes)})",
        f"sandboxes: {size_text(sum(s.size_bytes for s in held))} in {len(held)}"
        + (f" ({states})" if states else ""),
    ]
    width = max((len(s.sandbox_id) for s in held), default=0)
    for box in sorted(held, key=lambda s: -s.size_bytes):
        lines.append(
            f"  {box.sandbox_id:<{width}}  {box.state:<7}  {size_text(box.size_bytes):>10}  "
            f"{_about(box)}{_limit(box)}"
        )
        if box.state == "paused" and box.host is not None:
            lines.append(f"  {'':<{width}}  on the host: {host_text(box.host)}")
    if gone:
        freed = sum(s.freed_bytes or 0 for s in gone)
        lines.append(
            f"deleted sandboxes: {len(gone)} keep {size_text(sum(s.size_bytes for s in gone))} "
            f"of records and last words (they held {size_text(freed)})"
        )
    snaps = usage.snapshots
    lines.append(f"snapshots: {size_text(sum(s.size_bytes for s in snaps))} in {len(snaps)}")
    for snap in sorted(snaps, key=lambda s: -s.size_bytes):
        run = snap.labels.get(LABEL_RUN, "?")
        lines.append(f"  {snap.snapshot_id}  {size_text(snap.size_bytes):>10}  run {run}")
    if usage.trash_bytes:
        lines.append(
            f"half deleted: {size_text(usage.trash_bytes)} (a delete cut short; "
            "overnight reap finishes it)"
        )
    return "\n".join(lines)


def host_text(held: HostHeld) -> str:
    """What a paused sandbox holds on the host beside its files, and why."""
    if held.nothing:
        return "its files only (no process; its image mounted again when read or woken)"
    parts = []
    if held.processes:
        plural = "es" if held.processes != 1 else ""
        parts.append(f"{held.processes} process{plural} ({size_text(held.memory_bytes)} of memory)")
    if held.mounts:
        parts.append("its image mounted")
    elif held.loops:
        parts.append("its image's loop device attached")
    return ", ".join(parts) + (f": {held.why}" if held.why else "")


def _limit(box: SandboxDisk) -> str:
    """Its disk limit, and what its image holds inside (the size shown first is the image's
    file on this disk)."""
    if box.limit_bytes is None:
        return ""
    used = "" if box.used_bytes is None else f"{size_text(box.used_bytes)} used of "
    return f"; {used}a {size_text(box.limit_bytes)} disk"


def _about(box: SandboxDisk) -> str:
    run = box.labels.get(LABEL_RUN)
    about = f"run {run}, attempt {box.labels.get(LABEL_ATTEMPT, '?')}" if run else "no run"
    until = parse_label(box.labels.get(LABEL_KEEP_UNTIL))
    if until is not None:
        about += f": kept for a look until {until:%Y-%m-%d %H:%M} UTC (then overnight reap)"
    elif box.state == "stopped":
        about += ": stopped, not yet deleted (overnight reap deletes it)"
    return about


def _json(usage: DiskUsage) -> dict[str, Any]:
    return {
        "root": usage.root,
        "free_bytes": usage.free_bytes,
        "total_bytes": usage.total_bytes,
        "trash_bytes": usage.trash_bytes,
        "sandboxes": [
            {
                "sandbox_id": s.sandbox_id,
                "state": "deleted" if s.deleted_at is not None else s.state,
                "size_bytes": s.size_bytes,
                "run_id": s.labels.get(LABEL_RUN),
                "attempt": s.labels.get(LABEL_ATTEMPT),
                "keep_until": _iso(parse_label(s.labels.get(LABEL_KEEP_UNTIL))),
                "deleted_at": _iso(s.deleted_at),
                "freed_bytes": s.freed_bytes,
                "limit_bytes": s.limit_bytes,
                "used_bytes": s.used_bytes,
                "host": None if s.host is None else _held_json(s.host),
            }
            for s in usage.sandboxes
        ],
        "snapshots": [
            {
                "snapshot_id": s.snapshot_id,
                "size_bytes": s.size_bytes,
                "run_id": s.labels.get(LABEL_RUN),
            }
            for s in usage.snapshots
        ],
    }


def _held_json(held: HostHeld) -> dict[str, Any]:
    return {
        "processes": held.processes,
        "memory_bytes": held.memory_bytes,
        "mounts": held.mounts,
        "loops": held.loops,
        "why": held.why,
    }


def _iso(when: Any) -> str | None:
    return None if when is None else str(when.isoformat())


COMMANDS = (
    Command(
        "disk", "what local sandboxes and snapshots hold on this machine's disk", _arguments, run
    ),
)
