"""What runs in a local sandbox: agents (detached, started once per start key, outliving the
worker) and commands (run to completion), each wrapped to run isolated as its sandbox was
made, with the worker's few passed-through variables and no others. Mixed into `LocalEngine`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from activities.gateway import service as gateway_service
from activities.providers.local import cgroup_plan as local_cgroup_plan
from activities.providers.local import isolation as local_isolation
from activities.providers.local import procs as local_procs
from activities.providers.local import run_store
from activities.providers.local.files import WorkspaceMap
from activities.providers.local.mounts import SANDBOX_HOME
from activities.providers.local.procs import ProcessRecord
from activities.providers.local.state import (
    PROCESS_ID_PATTERN,
    SANDBOX_FILE,
    SandboxMeta,
    process_id_for,
)
from activities.providers.protocol import CommandOutput, ProviderError, SandboxNotRunning

# Variables of the worker that commands and agents inherit; anything else must be asked for.
PASSED_THROUGH_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")


class GuestCommands:
    """Agents (`start_process`, `process`) and commands (`run`) in a sandbox (`LocalEngine`
    supplies the state and lock helpers, `GuestFiles` the working folder's check,
    `KeptSandboxes` the disk's mount)."""

    home: Path

    if TYPE_CHECKING:

        def folder(self, sandbox_id: str) -> Path: ...

        def workspace(self, sandbox_id: str) -> WorkspaceMap: ...

        def get(self, sandbox_id: str) -> SandboxMeta: ...

        def _changing(self, sandbox_id: str) -> AbstractContextManager[SandboxMeta]: ...

        def _real_dir(self, sandbox_id: str, sandbox_path: str) -> Path: ...

        def ensure_disk(self, sandbox_id: str) -> None: ...

    def start_process(
        self,
        sandbox_id: str,
        start_key: str,
        command: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> tuple[ProcessRecord, bool]:
        """Start `command` once per `start_key`; a repeated key returns the first process.

        True when started now. The process runs `bash -c` in its own session and outlives the
        calling process; `env` (mapped like commands) is added to the sandbox's base env.
        """
        process_id = process_id_for(start_key)
        with self._changing(sandbox_id) as meta:
            proc_dir = self.folder(sandbox_id) / "processes" / process_id
            if proc_dir.exists():
                return local_procs.read_record(proc_dir), False
            if meta.state != "running":
                raise SandboxNotRunning(sandbox_id, meta.state)
            sandbox_cwd = cwd or "/workspace"
            self._real_dir(sandbox_id, sandbox_cwd)
            local_procs.launch(
                proc_dir,
                wrapped=self._wrap(meta, command, sandbox_cwd, env, agent=True),
                sandbox_file=self.folder(sandbox_id) / SANDBOX_FILE,
                sandbox_command=command,
                sandbox_cwd=sandbox_cwd,
            )
            return local_procs.read_record(proc_dir), True

    def process(self, sandbox_id: str, process_id: str) -> ProcessRecord | None:
        """An agent's state and exit code, or None if the sandbox has no such process."""
        self.get(sandbox_id)  # enforces the deadline first
        proc_dir = self.folder(sandbox_id) / "processes" / process_id
        if not PROCESS_ID_PATTERN.match(process_id) or not proc_dir.is_dir():
            return None
        return local_procs.read_record(proc_dir)

    def run(
        self,
        sandbox_id: str,
        command: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_seconds: float = 600,
    ) -> CommandOutput:
        """Run `bash -c command` to completion (killed at the timeout or the deadline)."""
        meta = self.get(sandbox_id)
        if meta.state != "running":
            raise SandboxNotRunning(sandbox_id, meta.state)
        if meta.deadline is not None:
            timeout_seconds = min(timeout_seconds, meta.deadline - time.time())
        self._real_dir(sandbox_id, cwd or "/workspace")
        return local_procs.run_command(
            self._wrap(meta, command, cwd or "/workspace", env, agent=False),
            timeout_seconds=timeout_seconds,
        )

    def _wrap(
        self,
        meta: SandboxMeta,
        command: str,
        cwd: str,
        extra: Mapping[str, str] | None,
        *,
        agent: bool,
    ) -> local_isolation.Wrapped:
        """`command` ready to run in the sandbox, isolated as it was created."""
        env = {name: os.environ[name] for name in PASSED_THROUGH_ENV if name in os.environ}
        env.setdefault("PATH", os.defpath)
        isolated = meta.isolation == "bubblewrap"
        env["HOME"] = SANDBOX_HOME if isolated else str(self.folder(meta.id) / "home")
        mapped = meta.isolation == "none"  # isolated, /workspace is real: nothing to rewrite
        env.update(self.workspace(meta.id).map_env(dict(extra or {})) if mapped else extra or {})
        if meta.network == "gateway" and meta.gateway_port is not None:
            env.update(gateway_service.sandbox_env(self.home, meta.id, meta.gateway_port))
        folder = self.folder(meta.id)
        self.ensure_disk(meta.id)
        if meta.cgroups:
            try:
                local_cgroup_plan.ensure(meta.freezer, meta.cgroups, meta.systemd_slice)
            except OSError as error:
                raise ProviderError(f"cannot make the sandbox's cgroup: {error}") from None
        if meta.mounts:  # its run's store mounted again after a reboot, or left out
            meta = dataclasses.replace(meta, mounts=run_store.ready(meta.mounts))
        return local_isolation.wrap(folder, self.home, meta, command, cwd, env, agent=agent)
