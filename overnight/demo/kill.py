"""The agent demo's kill: while the coding agent's CLI runs the script's slow tool call, find
its native binary among the machine's processes and SIGKILL it, and only it (what it leaves
is the adapter's to end). The CLI is found as this machine numbers it: a process whose argv[0]
is the kind's binary under the sandbox's agents folder and whose environment names the run
(the adapter passes its own on to the CLI). It is killed only once its session transcript
records the call: killed before, the resumed session would have lost the call itself, not
been cut off in it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from overnight.cli import client as api
from overnight.core.coding_agents import SANDBOX_AGENTS_ROOT

KILL_TIMEOUT_SECONDS = 180
# Each CLI's native binary, and where under its HOME it writes its session transcripts.
BINARY = {"claude-code": "claude", "codex": "codex"}
TRANSCRIPTS = {"claude-code": ".claude/projects", "codex": ".codex/sessions"}


class RequestLog(Protocol):
    def requests(self) -> list[dict[str, Any]]: ...


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as source:
            return [part.decode(errors="replace") for part in source.read().split(b"\0") if part]
    except OSError:
        return []


def _environ_has(pid: int, entry: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as source:
            return entry.encode() in source.read().split(b"\0")
    except OSError:
        return False


def _environ_value(pid: int, name: str) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as source:
            entries = source.read().split(b"\0")
    except OSError:
        return None
    prefix = f"{name}=".encode()
    found = [entry[len(prefix) :] for entry in entries if entry.startswith(prefix)]
    return found[0].decode(errors="replace") if found else None


def transcript_mentions(pid: int, text: str, kind: str = "claude-code") -> bool:
    """Whether the CLI's session transcript (under its own HOME, seen through its root) holds
    `text` yet: a CLI writes a tool call into it a little after the tool starts."""
    home = _environ_value(pid, "HOME")
    if home is None:
        return False
    sessions = Path(f"/proc/{pid}/root") / home.lstrip("/") / TRANSCRIPTS[kind]
    try:
        paths = list(sessions.rglob("*.jsonl"))
    except OSError:
        return False
    return any(text in _tail_of(path) for path in paths)


# How much of a transcript's end is read: the slow call is among its last records.
TRANSCRIPT_TAIL_BYTES = 1 << 20


def _tail_of(path: Path) -> str:
    """The end of a regular file (a FIFO or a folder named like one reads as empty: the read
    never blocks, and never takes more than TRANSCRIPT_TAIL_BYTES)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return ""
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode):
        os.close(fd)
        return ""
    with os.fdopen(fd, "rb") as source:
        source.seek(max(0, found.st_size - TRANSCRIPT_TAIL_BYTES))
        return source.read(TRANSCRIPT_TAIL_BYTES).decode("utf-8", errors="replace")


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as source:
            return int(source.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _pids() -> Iterator[int]:
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def cli_pids(run_id: str, kind: str = "claude-code") -> list[int]:
    """The CLI's native binary of run `run_id`, as this machine numbers it: a process whose
    argv[0] is the kind's binary under the sandbox's agents folder and whose environment
    names the run (the adapter passes its own on to the CLI). Topmost first."""
    found = [
        pid
        for pid in _pids()
        if (argv := _argv(pid))
        and argv[0].startswith(SANDBOX_AGENTS_ROOT + "/")
        and argv[0].endswith("/" + BINARY[kind])
        and _environ_has(pid, f"OVERNIGHT_RUN_ID={run_id}")
    ]
    return [pid for pid in found if _parent(pid) not in found]


def descendants(pid: int) -> list[tuple[int, list[str]]]:
    children: dict[int, list[int]] = {}
    for other in _pids():
        children.setdefault(_parent(other), []).append(other)
    found, queue = [], list(children.get(pid, []))
    while queue:
        child = queue.pop()
        found.append((child, _argv(child)))
        queue += children.get(child, [])
    return found


@dataclass
class Kill:
    pid: int
    during: str  # the tool process it was running
    session_before: list[str] = field(default_factory=list)
    requests_before: int = 0
    at: float = 0.0


async def kill_during_the_slow_call(
    run_id: str,
    kind: str,
    fake: RequestLog,
    slow: tuple[list[str], str],
    out: Callable[[str], None],
) -> Kill:
    """Wait until the CLI runs the slow tool call (its process is under the CLI's), then
    SIGKILL the CLI, and only it: what it leaves is the adapter's to end."""
    deadline = time.monotonic() + KILL_TIMEOUT_SECONDS
    marker, during = slow  # the slow call's process (its argv), and its command
    while time.monotonic() < deadline:
        for pid in await asyncio.to_thread(cli_pids, run_id, kind):
            tools = await asyncio.to_thread(descendants, pid)
            if any(argv == marker for _, argv in tools):
                seen = fake.requests()
                # Killed before its transcript records the call, the resumed session would
                # have lost the call itself, not been cut off in it: wait for the record.
                calls = seen[-1]["call_ids"] if seen else []
                recorded = calls and await asyncio.to_thread(
                    transcript_mentions, pid, calls[0], kind
                )
                if calls and not recorded:
                    await asyncio.sleep(0.05)
                    continue
                os.kill(pid, signal.SIGKILL)
                kill = Kill(
                    pid=pid,
                    during=during,
                    session_before=sessions_of(seen),
                    requests_before=len(seen),
                    at=time.monotonic(),
                )
                out(
                    f"  >>> killed the CLI (pid {pid}, SIGKILL) during its tool call "
                    f"({kill.during}), after {len(seen)} model requests"
                )
                return kill
        await asyncio.sleep(0.1)
    raise api.OvernightError(
        f"the CLI of {run_id} never reached its slow tool call in {KILL_TIMEOUT_SECONDS}s"
    )


def sessions_of(requests: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(r.get("session_id") or "") for r in requests))
