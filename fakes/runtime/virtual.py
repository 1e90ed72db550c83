"""Agents that cost nothing, for benchmarks of many runs on one key (`VirtualAgents`, mixed
into `FakeRuntime`).

A real agent in the fake is a launcher, a sandbox and a shell: tens of MiB each, too many for a
thousand on one machine. A virtual agent is only its process record, in the local engine's own
format (`activities.providers.local.procs`): it runs while the fake's own process lives, and
`end_virtual_agent` ends it with an exit code, as its launcher would, and writes the exit
marker overnight's wrapper writes. What the agent writes is written straight into the
sandbox's folder (`write_guest_file`, atomically, as an agent does). Everything the API says
about them (processes, files, watches, events) is what it says about real ones.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from activities.providers.local import launcher
from activities.providers.local.provider import LocalProvider

if TYPE_CHECKING:
    from fakes.runtime.api import RuntimeApi


class VirtualAgents:
    """Mixed into `FakeRuntime` (which supplies `api`)."""

    if TYPE_CHECKING:

        @property
        def api(self) -> RuntimeApi: ...

    def _local(self) -> LocalProvider:
        engine = self.api.engine
        if not isinstance(engine, LocalProvider):
            raise TypeError("virtual agents need the fake on the local engine")
        return engine

    def start_virtual_agent(self, sandbox_id: str, command: str) -> str:
        """A process that runs `command` as far as anyone can tell; its id."""
        process_id = f"v{uuid.uuid4().hex[:12]}"
        proc_dir = self._local().engine.folder(sandbox_id) / "processes" / process_id
        proc_dir.mkdir(parents=True)
        now = time.time()
        launcher.write_json(
            proc_dir / launcher.LAUNCH_FILE,
            {"sandbox_command": command, "sandbox_cwd": "/workspace", "created_at": now},
        )
        pid = os.getpid()
        started = {"pid": pid, "started_at": now, "proc_start": launcher.proc_start_time(pid)}
        launcher.write_json(proc_dir / launcher.PROCESS_FILE, started)
        self.api.commands.adopt(sandbox_id, process_id, command, datetime.fromtimestamp(now, UTC))
        return process_id

    def end_virtual_agent(
        self, sandbox_id: str, process_id: str, exit_code: int, marker: str | None
    ) -> float:
        """End it with `exit_code` (and write overnight's exit marker at `marker`); when."""
        proc_dir = self._local().engine.folder(sandbox_id) / "processes" / process_id
        ended_at = time.time()
        launcher.write_json(
            proc_dir / launcher.EXIT_FILE,
            {"state": "exited", "exit_code": exit_code, "ended_at": ended_at},
        )
        if marker is not None:
            self.write_guest_file(sandbox_id, marker, f"{exit_code}\n".encode())
        return ended_at

    def write_guest_file(self, sandbox_id: str, path: str, data: bytes) -> None:
        """Write a sandbox file as its agent would: a temporary file renamed over it."""
        target: Path = self._local().engine.host_path(sandbox_id, path)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=target.parent)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, target)
