"""Forensics on local sandboxes: read straight from the engine's files.

An agent's output is `<sandbox>/processes/<id>/output.log` (stdout and stderr together, as
its launcher appends them), so reading it never touches the agent: no reader can slow it
down, and a paused sandbox is read as it is, without waking it. A stopped sandbox's disk is
gone (see disk): its agents' records are kept (`agents` lists them), their output is not (a
read says how many bytes it no longer keeps).
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import stat
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from activities.providers.forensics import (
    OUTPUT_READ_BYTES,
    AgentProcess,
    FileEntry,
    FileListing,
    OutputChunk,
    parse_start_key,
)
from activities.providers.local import disk as local_disk
from activities.providers.local import procs as local_procs
from activities.providers.local.engine import LocalEngine
from activities.providers.local.files import WORKSPACE, NotFollowed, OutsideWorkspace, open_dir
from activities.providers.local.launcher import OUTPUT_FILE
from activities.providers.local.read_pool import read_in_pool
from activities.providers.local.state import invalid_request
from activities.providers.protocol import FileRead, SandboxNotFound

# How often a waiting read looks at the file again.
LOOK_SECONDS = 0.1


class LocalForensics:
    wakes_on_read = False

    def __init__(self, engine: LocalEngine) -> None:
        self.engine = engine

    async def agents(self, sandbox_id: str) -> list[AgentProcess]:
        return await asyncio.to_thread(self._agents, sandbox_id)

    async def read_output(
        self, sandbox_id: str, process_id: str, cursor: int, *, wait_seconds: float = 0
    ) -> OutputChunk:
        return await asyncio.to_thread(self._read, sandbox_id, process_id, cursor, wait_seconds)

    async def output_tail(self, sandbox_id: str, process_id: str, max_bytes: int) -> OutputChunk:
        def tail() -> OutputChunk:
            log = self._log(sandbox_id, process_id)
            size = _size(log)
            return self._read(sandbox_id, process_id, max(0, size - max_bytes), 0)

        return await read_in_pool(sandbox_id, tail)

    async def list_files(self, sandbox_id: str, path: str, max_entries: int) -> FileListing:
        return await read_in_pool(sandbox_id, self._list, sandbox_id, path, max_entries)

    async def read_file(
        self, sandbox_id: str, path: str, max_bytes: int, *, seen_running: bool = False
    ) -> FileRead:
        return await read_in_pool(sandbox_id, self.engine.read_file, sandbox_id, path, max_bytes)

    # ----- in a thread -----

    def _agents(self, sandbox_id: str) -> list[AgentProcess]:
        procs = self.engine.folder(sandbox_id) / "processes"
        if not procs.is_dir():
            raise SandboxNotFound(sandbox_id)
        found = []
        for record in local_procs.all_records(procs):
            parsed = parse_start_key(record.process_id)
            if parsed is None:
                continue
            started = record.started_at
            found.append(
                AgentProcess(
                    process_id=record.process_id,
                    start_key=record.process_id,
                    fresh_start=parsed[1],
                    state=record.state,
                    exit_code=record.exit_code,
                    started_at=None if started is None else datetime.fromtimestamp(started, UTC),
                )
            )
        return sorted(found, key=lambda a: a.fresh_start)

    def _log(self, sandbox_id: str, process_id: str) -> Path:
        proc_dir = self.engine.folder(sandbox_id) / "processes" / process_id
        if not proc_dir.is_dir():
            raise invalid_request(f"sandbox {sandbox_id} has no process {process_id}")
        return proc_dir / OUTPUT_FILE

    def _read(self, sandbox_id: str, process_id: str, cursor: int, wait: float) -> OutputChunk:
        log = self._log(sandbox_id, process_id)
        proc_dir = log.parent
        give_up = time.monotonic() + max(0.0, wait)
        while True:
            record = local_procs.read_record(proc_dir)
            ended = record.state != "running"
            # Read after the state: output written before an exit is never missed.
            size = _size(log)
            if size > cursor or ended or time.monotonic() >= give_up:
                break
            time.sleep(LOOK_SECONDS)
        gone = local_disk.output_size(proc_dir) if ended and not log.exists() else None
        if gone is not None:
            # Deleted with its sandbox (a reader a moment behind): told what it missed.
            end = max(cursor, gone)
            return OutputChunk(b"", end, record.state, record.exit_code, dropped=end - cursor)
        start = min(max(0, cursor), size)
        data = b""
        if size > start:
            data = _read_log(log, start, min(size - start, OUTPUT_READ_BYTES))
        # Ended only once everything it wrote has been handed out.
        done = ended and start + len(data) >= size
        return OutputChunk(
            data=data,
            next_cursor=start + len(data),
            state=record.state if done else "running",
            exit_code=record.exit_code if done else None,
        )

    def _list(self, sandbox_id: str, path: str, max_entries: int) -> FileListing:
        """The folder at `path` and everything below it, through no symlink: folders are
        opened relative to their parent without following links (a link is listed, never
        entered), so nothing outside the workspace is listed, whatever the agent swaps in."""
        if self.engine.find(sandbox_id) is None:
            raise SandboxNotFound(sandbox_id)
        workspace = self.engine.workspace(sandbox_id)
        try:
            parts = workspace.parts(path)
            top = open_dir(workspace.root, parts)
        except FileNotFoundError:
            return FileListing(entries=[], is_dir=False)
        except NotFollowed as why:
            if "symbolic link" in str(why):
                raise invalid_request(f"{path}: {why}; inspect stays inside /workspace") from None
            return FileListing(entries=[], is_dir=False)  # a file: read, not listed
        except OutsideWorkspace as error:
            raise invalid_request(str(error)) from None
        base = posixpath.join(WORKSPACE, *parts)
        entries: list[FileEntry] = []
        more = 0
        try:
            for folder, dirs, files, folder_fd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
                for name in sorted(dirs) + sorted(files):
                    shown = posixpath.normpath(posixpath.join(base, folder, name))
                    entry = _entry(name, folder_fd, shown)
                    if entry is None:
                        continue
                    if len(entries) < max_entries:
                        entries.append(entry)
                    else:
                        more += 1
                # Not into .git folders (listed, not entered); links are never entered.
                dirs[:] = sorted(d for d in dirs if d != ".git")
        finally:
            os.close(top)
        return FileListing(entries=sorted(entries, key=lambda e: e.path), more=more)


def _size(log: Path) -> int:
    try:
        return log.stat().st_size
    except FileNotFoundError:
        return 0


def _read_log(log: Path, start: int, count: int) -> bytes:
    """`count` bytes of an output log from `start`: only a regular file, never blocking."""
    try:
        fd = os.open(log, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.pread(fd, count, start)
    finally:
        os.close(fd)


def _entry(name: str, folder_fd: int, shown: str) -> FileEntry | None:
    try:
        info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except OSError:
        return None
    mode = info.st_mode
    kind: Literal["file", "directory", "symlink", "other"] = "other"
    if stat.S_ISDIR(mode):
        kind = "directory"
    elif stat.S_ISREG(mode):
        kind = "file"
    elif stat.S_ISLNK(mode):
        kind = "symlink"
    return FileEntry(
        path=shown,
        kind=kind,
        size=info.st_size if kind == "file" else 0,
        modified_at=datetime.fromtimestamp(info.st_mtime, UTC),
    )
