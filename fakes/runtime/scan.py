"""File events from polling a folder: what changed between two looks, as Runtime names it.

A look (`look`) is each entry's kind, size, mtime, mode and inode; two looks differ by
`create` (a new name), `write` (a file's size, mtime or inode changed: an `os.replace` onto
it counts), `chmod` (only the mode changed), `remove` (a name gone), and `rename` (a name gone
and a new one with its inode, in the same look: `oldPath` is the old name). An atomic
`os.replace(tmp, target)` therefore shows as a `rename` from the temporary file when a look saw
it, else as a `create` or `write` of the target.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Entry:
    is_dir: bool
    size: int
    mtime_ns: int
    mode: int
    inode: int


Look = dict[str, Entry]  # relative path ("a/b.txt") -> entry


@dataclass(frozen=True)
class Filters:
    recursive: bool = False
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def skipped(self, rel: str) -> bool:
        """Excluded, by a pattern matching the path, its name or any of its folders."""
        return any(_matches(rel, pattern) for pattern in self.exclude)

    def wanted(self, rel: str) -> bool:
        return not self.skipped(rel) and (
            not self.include or any(_matches(rel, pattern) for pattern in self.include)
        )


def _matches(rel: str, pattern: str) -> bool:
    parts = rel.split("/")
    return fnmatch.fnmatch(rel, pattern) or any(fnmatch.fnmatch(p, pattern) for p in parts)


def look(root: Path, filters: Filters) -> Look | None:
    """Every entry under `root` (direct entries only unless recursive); None if `root` is gone."""
    found: Look = {}
    if not root.is_dir():
        return None
    folders = [""]
    while folders:
        folder = folders.pop()
        try:
            entries = list(os.scandir(root / folder if folder else root))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            rel = f"{folder}/{entry.name}" if folder else entry.name
            if filters.skipped(rel):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # gone since the listing
            is_dir = entry.is_dir(follow_symlinks=False)
            found[rel] = Entry(is_dir, st.st_size, st.st_mtime_ns, st.st_mode & 0o7777, st.st_ino)
            if is_dir and filters.recursive:
                folders.append(rel)
    return found


def differences(before: Look, after: Look) -> list[dict[str, Any]]:
    """The events that turn `before` into `after`, with paths relative to the root."""
    events: list[dict[str, Any]] = []
    gone = {rel: entry for rel, entry in before.items() if rel not in after}
    by_inode = {entry.inode: rel for rel, entry in gone.items()}

    def renamed_from(entry: Entry) -> str | None:
        """The gone name this entry was moved from (same inode, same kind), if any."""
        old = by_inode.get(entry.inode)
        if old is None or gone[old].is_dir != entry.is_dir:
            return None
        del by_inode[entry.inode], gone[old]
        return old

    for rel, entry in sorted(after.items()):
        was = before.get(rel)
        if was is not None and was.inode == entry.inode:
            if not entry.is_dir and (was.size, was.mtime_ns) != (entry.size, entry.mtime_ns):
                events.append({"type": "write", "path": rel})
            elif was.mode != entry.mode:
                events.append({"type": "chmod", "path": rel})
            continue
        # A new name, or a name whose inode changed (something was moved or written onto it).
        old = renamed_from(entry)
        if old is not None:
            events.append({"type": "rename", "path": rel, "oldPath": old})
        else:
            events.append({"type": "create" if was is None else "write", "path": rel})
    for rel in sorted(gone):
        events.append({"type": "remove", "path": rel})
    return events


def fold(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Writes to one path in a batch become one `write` with a `count` (when more than one)."""
    folded: list[dict[str, Any]] = []
    writes: dict[str, dict[str, Any]] = {}
    for event in events:
        if event["type"] == "write" and event["path"] in writes:
            earlier = writes[event["path"]]
            earlier["count"] = earlier.get("count", 1) + 1
            continue
        folded.append(dict(event))
        if event["type"] == "write":
            writes[event["path"]] = folded[-1]
    return folded
