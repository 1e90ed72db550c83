"""Forensics on Runtime sandboxes, through the provider's client.

Output is read by cursor with one long poll at a time (`GET …/processes/{pid}/output?
cursor=N&waitMs=M`, an answer `{"events", "nextCursor", "state", "exitCode"}`), never with
`follow=true`: while a follow stream is open Runtime makes the process wait for its reader,
so a slow reader (a person's laptop on hotel Wi-Fi) would slow the agent down. A tail starts
at the process's `outputBytes` less the tail's size, so it costs two small requests.

Every call here is a guest call, which wakes a paused sandbox: callers look at its state
first (see `overnight.cli.forensics`), and the worker only reads sandboxes it has just seen
running or is about to pause again.
"""

from __future__ import annotations

import base64
import math
import shlex
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from activities.providers.forensics import (
    AgentProcess,
    FileEntry,
    FileListing,
    OutputChunk,
    parse_start_key,
)
from activities.providers.protocol import FileRead
from activities.providers.runtime.convert import process_info, start_key_of
from activities.providers.runtime.errors import runtime_call
from activities.providers.runtime.provider import RuntimeProvider

# Runtime's longest long poll.
MAX_WAIT_MS = 8000
# A tail read without `outputBytes` reads from the start: at most this many requests.
MAX_TAIL_READS = 64
NOT_A_FOLDER = "overnight:not-a-folder"
_KINDS: dict[str, Any] = {"f": "file", "d": "directory", "l": "symlink"}


class RuntimeForensics:
    wakes_on_read = True

    def __init__(self, provider: RuntimeProvider) -> None:
        self.provider = provider

    async def agents(self, sandbox_id: str) -> list[AgentProcess]:
        async with runtime_call(sandbox_id, self.provider._budget):
            listed = await self.provider._handle(sandbox_id).processes()
        found = []
        for info in listed:
            key = start_key_of(info)
            if key is None:
                continue
            parsed = parse_start_key(key)
            if parsed is None:
                continue
            process = process_info(info)
            found.append(
                AgentProcess(
                    process_id=process.process_id,
                    start_key=key,
                    fresh_start=parsed[1],
                    state=process.state,
                    exit_code=process.exit_code,
                    started_at=_time(info.get("startedAt")),
                )
            )
        return sorted(found, key=lambda a: a.fresh_start)

    async def read_output(
        self, sandbox_id: str, process_id: str, cursor: int, *, wait_seconds: float = 0
    ) -> OutputChunk:
        wait_ms = max(0, min(MAX_WAIT_MS, math.floor(wait_seconds * 1000)))
        path = (
            f"/v1/sandboxes/{quote(sandbox_id, safe='')}/processes/"
            f"{quote(process_id, safe='')}/output"
        )
        transport = self.provider._client().sandboxes._t
        async with runtime_call(sandbox_id, self.provider._budget + wait_ms / 1000):
            answer = await transport.json(
                "GET",
                path,
                query={"cursor": cursor, "waitMs": wait_ms},
                timeout=wait_ms / 1000 + 30,
            )
        return _chunk(answer or {}, cursor)

    async def output_tail(self, sandbox_id: str, process_id: str, max_bytes: int) -> OutputChunk:
        async with runtime_call(sandbox_id, self.provider._budget):
            process = await self.provider._handle(sandbox_id).process(process_id)
        size = process.info.get("outputBytes")
        if isinstance(size, int) and size >= 0:
            chunk = await self.read_output(sandbox_id, process_id, max(0, size - max_bytes))
            return _last(chunk, max_bytes)
        # No size said: read it all (Runtime keeps the last 1 MiB), keeping only the end.
        kept, cursor = b"", 0
        chunk = await self.read_output(sandbox_id, process_id, 0)
        for _ in range(MAX_TAIL_READS):
            kept = (kept + chunk.data)[-max_bytes:]
            if not chunk.data or chunk.next_cursor == cursor:
                break
            cursor = chunk.next_cursor
            chunk = await self.read_output(sandbox_id, process_id, cursor)
        return OutputChunk(kept, chunk.next_cursor, chunk.state, chunk.exit_code)

    async def list_files(self, sandbox_id: str, path: str, max_entries: int) -> FileListing:
        # Runtime has no folder listing: `find` in the sandbox (GNU find, as in its images).
        shown = "%y\\t%s\\t%T@\\t%p\\n"
        where = shlex.quote(path)
        command = (
            f"if [ -L {where} ] || [ ! -d {where} ]; then echo {NOT_A_FOLDER}; exit 0; fi; "
            f"find {where} -mindepth 1 \\( -type d -name .git -printf '{shown}' "
            f"-prune \\) -o -printf '{shown}' > /tmp/.overnight-ls 2>/dev/null; "
            f"head -n {max_entries} /tmp/.overnight-ls; wc -l < /tmp/.overnight-ls; "
            "rm -f /tmp/.overnight-ls"
        )
        out = await self.provider.run(sandbox_id, command, timeout_seconds=60)
        lines = out.stdout.splitlines()
        if lines[:1] == [NOT_A_FOLDER]:
            return FileListing(entries=[], is_dir=False)
        total = int(lines.pop()) if lines and lines[-1].strip().isdigit() else len(lines)
        entries = [e for e in (_file_entry(line) for line in lines) if e is not None]
        return FileListing(
            entries=sorted(entries, key=lambda e: e.path), more=max(0, total - len(entries))
        )

    async def read_file(
        self, sandbox_id: str, path: str, max_bytes: int, *, seen_running: bool = False
    ) -> FileRead:
        return await self.provider.read_file(sandbox_id, path, max_bytes, seen_running=seen_running)


def _chunk(answer: dict[str, Any], cursor: int) -> OutputChunk:
    pieces: list[bytes] = []
    dropped = 0
    state = str(answer.get("state") or "running")
    exit_code = answer.get("exitCode")
    for event in answer.get("events") or []:
        kind = event.get("type")
        if kind in ("stdout", "stderr"):
            if "base64" in event:
                pieces.append(base64.b64decode(event["base64"]))
            else:
                pieces.append(str(event.get("data", "")).encode())
        elif kind == "truncated":
            dropped += int(event.get("droppedBytes") or 0)
        elif kind == "exit":
            state = str(event.get("state") or "exited")
            exit_code = event.get("exitCode", exit_code)
    next_cursor = answer.get("nextCursor")
    data = b"".join(pieces)
    return OutputChunk(
        data=data,
        next_cursor=int(next_cursor) if isinstance(next_cursor, int) else cursor + len(data),
        state="exited" if state == "exited" else "killed" if state == "killed" else "running",
        exit_code=int(exit_code) if isinstance(exit_code, int) else None,
        dropped=dropped,
    )


def _last(chunk: OutputChunk, max_bytes: int) -> OutputChunk:
    if len(chunk.data) <= max_bytes:
        return chunk
    return OutputChunk(
        chunk.data[-max_bytes:], chunk.next_cursor, chunk.state, chunk.exit_code, chunk.dropped
    )


def _file_entry(line: str) -> FileEntry | None:
    parts = line.split("\t", 3)
    if len(parts) != 4:
        return None
    kind, size, modified, path = parts
    try:
        when = datetime.fromtimestamp(float(modified), UTC)
        length = int(size)
    except ValueError:
        return None
    shown = _KINDS.get(kind, "other")
    return FileEntry(path=path, kind=shown, size=length if shown == "file" else 0, modified_at=when)


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
