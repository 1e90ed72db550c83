"""A local sandbox's files as its guest sees them: paths under /workspace, mapped to the
sandbox's folder and refused when they leave it. Mixed into `LocalEngine`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from activities.providers.local.fd_copy import copy_into
from activities.providers.local.files import OutsideWorkspace, WorkspaceMap
from activities.providers.local.state import SandboxMeta, invalid_request
from activities.providers.protocol import FileRead, SandboxNotRunning


class GuestFiles:
    """Reads and writes inside a sandbox's /workspace (`LocalEngine` supplies `workspace`
    and `get`)."""

    if TYPE_CHECKING:

        def workspace(self, sandbox_id: str) -> WorkspaceMap: ...

        def get(self, sandbox_id: str) -> SandboxMeta: ...

    def host_path(self, sandbox_id: str, path: str) -> Path:
        """Where a sandbox path really is (not resolved); InvalidRequest outside /workspace."""
        try:
            return self.workspace(sandbox_id).host_path(path)
        except OutsideWorkspace as error:
            raise invalid_request(str(error)) from None

    def stamp(self, sandbox_id: str, path: str) -> str:
        """What a file looks like without reading it: its size and modification time."""
        try:
            found = os.stat(self.workspace(sandbox_id).host_path(path))
        except OutsideWorkspace:
            return "outside"
        except OSError:
            return "missing"
        return f"{found.st_size}:{found.st_mtime_ns}"

    def read_file(self, sandbox_id: str, path: str, max_bytes: int) -> FileRead:
        """A capped read: `too_large` after a stat alone; `outside` for paths leaving it."""
        self.get(sandbox_id)
        return self.workspace(sandbox_id).read_capped(path, max_bytes)

    def write_file(
        self, sandbox_id: str, path: str, data: bytes, *, mode: int | None = None
    ) -> None:
        """Write a file atomically, creating its folders, through no symlink: each folder is
        opened relative to the one before (O_NOFOLLOW), the file made and renamed in the last
        (see files.write_inside), so an agent swapping a folder for a link in the meantime
        cannot make the worker write outside the workspace. The sandbox's own user (a root
        worker's) gets the file and the folders made for it through their descriptors."""
        self._running(sandbox_id)
        try:
            self.workspace(sandbox_id).write(path, data, mode=mode, owner=self._owner(sandbox_id))
        except OutsideWorkspace as error:
            raise invalid_request(f"{path}: {error}") from None

    def upload_dir(self, sandbox_id: str, local_dir: str | Path, remote_dir: str) -> None:
        """Copy a local folder into the sandbox, merging with what is there, by descriptor on
        both sides (see fd_copy): no folder of the target is followed if it is a link."""
        source = Path(local_dir).expanduser()
        if not source.is_dir():
            raise invalid_request(f"{local_dir} is not a folder on this worker")
        self._running(sandbox_id)
        workspace = self.workspace(sandbox_id)
        try:
            copy_into(
                source, workspace.root, workspace.parts(remote_dir), owner=self._owner(sandbox_id)
            )
        except OutsideWorkspace as error:
            raise invalid_request(f"{remote_dir}: {error}") from None

    def _owner(self, sandbox_id: str) -> int | None:
        return self.get(sandbox_id).uid

    def _real_dir(self, sandbox_id: str, sandbox_path: str) -> Path:
        real = self.host_path(sandbox_id, sandbox_path)
        if not real.is_dir():
            raise invalid_request(f"working directory {sandbox_path} does not exist")
        return real

    def _running(self, sandbox_id: str) -> None:
        meta = self.get(sandbox_id)
        if meta.state != "running":
            raise SandboxNotRunning(sandbox_id, meta.state)
