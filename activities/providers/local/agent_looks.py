"""One watch's looks at a local agent, cheap enough to take often for many runs.

A look is a few `stat` calls and a signal 0: the sandbox's state file is parsed again only
when its modification time changes (or its lease may have ended), the agent's record only
once its exit file appears or its process is gone, and the checkpoint (and the kit's requests
file, when watched) is only stat'ed.
"""

from __future__ import annotations

import time
from pathlib import Path

from activities.models import SandboxInfo
from activities.providers.local import launcher
from activities.providers.local.convert import process_info, sandbox_info
from activities.providers.local.engine import LocalEngine
from activities.providers.local.procs import pid_alive
from activities.providers.local.state import SANDBOX_FILE, SandboxMeta
from activities.providers.polling_watch import Look
from activities.providers.protocol import ProcessInfo, SandboxNotFound


class LocalLook:
    def __init__(
        self,
        engine: LocalEngine,
        sandbox_id: str,
        process_id: str,
        checkpoint_path: str,
        requests_path: str | None = None,
    ) -> None:
        self.engine = engine
        self.sandbox_id = sandbox_id
        self.process_id = process_id
        self.checkpoint_path = checkpoint_path
        self.requests_path = requests_path
        folder = engine.folder(sandbox_id)
        self._sandbox_file = folder / SANDBOX_FILE
        self._exit_file = folder / "processes" / process_id / launcher.EXIT_FILE
        self._meta: SandboxMeta | None = None
        self._meta_stamp: int | None = None
        # The agent as last seen running, and its pid (None: read its record).
        self._running: ProcessInfo | None = None
        self._pid: int | None = None

    def __call__(self) -> Look:
        meta = self._sandbox()
        if meta is None:
            gone = SandboxInfo(sandbox_id=self.sandbox_id, name=self.sandbox_id, state="missing")
            missing = ProcessInfo(process_id=self.process_id, state="missing")
            return Look(gone, missing, "missing")
        requests = self.requests_path
        return Look(
            sandbox_info(meta),
            self._process(),
            self.engine.stamp(self.sandbox_id, self.checkpoint_path),
            None if requests is None else self.engine.stamp(self.sandbox_id, requests),
        )

    @property
    def deadline(self) -> float | None:
        """The lease end of the sandbox as last looked at (Unix seconds), if it has one."""
        return None if self._meta is None else self._meta.deadline

    def _sandbox(self) -> SandboxMeta | None:
        stamp = _mtime(self._sandbox_file)
        if stamp is None:
            return None
        meta = self._meta
        if meta is None or stamp != self._meta_stamp or meta.expired(time.time()):
            # `find` also enforces the lease end (pausing or stopping the sandbox).
            meta = self.engine.find(self.sandbox_id)
            self._meta, self._meta_stamp = meta, _mtime(self._sandbox_file)
        return meta

    def _process(self) -> ProcessInfo:
        if self._running is not None and self._pid is not None and self._still_running():
            return self._running
        try:
            record = self.engine.process(self.sandbox_id, self.process_id)
        except SandboxNotFound:
            record = None
        if record is None:
            return ProcessInfo(process_id=self.process_id, state="missing")
        info = process_info(record)
        running = info.state == "running"
        self._running, self._pid = (info, record.pid) if running else (None, None)
        return info

    def _still_running(self) -> bool:
        if self._exit_file.exists():
            return False
        assert self._pid is not None
        return pid_alive(self._pid)


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return None
