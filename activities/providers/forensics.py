"""Looking into a sandbox after the fact: its agents, their output, its files.

What `overnight logs` and `overnight inspect` read, and what the worker reads for an ended
attempt's last words. A second interface next to `SandboxProvider`, implemented by the
`local` and `runtime` providers' companions (`registry.forensics_for`): providers without one (a
benchmark's fake) simply have no output to show.

Reading never slows an agent down: output is read by cursor (a file offset on `local`, a
long poll `GET …/output?cursor=N&waitMs=M` on Runtime), never through a stream the agent's
process would wait for. Reading a paused Runtime sandbox wakes it (any guest call does):
callers check the state first and say so (see `overnight.cli.forensics`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from activities.models import ProcessState
from activities.providers.protocol import FileRead

# An agent's start key is `{run_id}-{attempt}-{fresh_start}` (activities.sandbox.agent_launch).
_START_KEY = re.compile(r"^(?P<run>.+)-(?P<attempt>\d+)-(?P<fresh>\d+)$")
# The most an output read returns at once.
OUTPUT_READ_BYTES = 256 * 1024
MAX_LISTED_FILES = 5000


@dataclass(frozen=True)
class AgentProcess:
    """One agent process of a sandbox (one per start: the first, then fresh-context ones)."""

    process_id: str
    start_key: str
    fresh_start: int
    state: ProcessState
    exit_code: int | None = None
    started_at: datetime | None = None


@dataclass(frozen=True)
class OutputChunk:
    """Output from `cursor` to `next_cursor` (byte offsets of stdout and stderr together)."""

    data: bytes
    next_cursor: int
    # The process's state after this read; `exit_code` once it ended.
    state: ProcessState
    exit_code: int | None = None
    # Bytes before `cursor` the sandbox no longer keeps (skipped over).
    dropped: int = 0


@dataclass(frozen=True)
class FileEntry:
    path: str
    kind: Literal["file", "directory", "symlink", "other"]
    size: int
    modified_at: datetime | None = None


@dataclass(frozen=True)
class FileListing:
    entries: list[FileEntry]
    # More entries than listed (cut at the limit).
    more: int = 0
    # False when the path is not a folder there (a file, or nothing): nothing is listed.
    is_dir: bool = True


class SandboxForensics(Protocol):
    # Whether reading wakes a paused sandbox (Runtime: every guest call does).
    wakes_on_read: bool

    async def agents(self, sandbox_id: str) -> list[AgentProcess]:
        """The agent processes overnight started in the sandbox, in start order."""
        ...

    async def read_output(
        self, sandbox_id: str, process_id: str, cursor: int, *, wait_seconds: float = 0
    ) -> OutputChunk:
        """Output past `cursor` (at most `OUTPUT_READ_BYTES`), waiting up to `wait_seconds`
        for some while the process runs."""
        ...

    async def output_tail(self, sandbox_id: str, process_id: str, max_bytes: int) -> OutputChunk:
        """The last `max_bytes` of the process's output (`next_cursor - len(data)` is where
        they start: 0 when this is all of it)."""
        ...

    async def list_files(self, sandbox_id: str, path: str, max_entries: int) -> FileListing:
        """What is under `path` (in /workspace), recursively, `.git` folders not entered."""
        ...

    async def read_file(
        self, sandbox_id: str, path: str, max_bytes: int, *, seen_running: bool = False
    ) -> FileRead: ...


def parse_start_key(start_key: str) -> tuple[int, int] | None:
    """(attempt, fresh_start) of an agent's start key, or None for another process."""
    found = _START_KEY.match(start_key)
    if found is None:
        return None
    return int(found["attempt"]), int(found["fresh"])
