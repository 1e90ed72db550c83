"""Files for the local engine: atomic writes, `/workspace` mapping, capped reads.

A local sandbox sees its folder's `workspace/` as `/workspace`: mounted there when it is
isolated (see local_isolation), and otherwise (`isolation: "none"`) by rewriting commands,
working directories and environment values textually, so `/workspace` must appear as its own
path component to be mapped: `/workspace/app` and `"/workspace"` are mapped,
`/home/me/workspace` and `/workspaces` are not. The engine's own reads and writes always go
through `WorkspaceMap.host_path`.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

from activities.providers.protocol import FileRead

WORKSPACE = "/workspace"
_WORKSPACE_TOKEN = re.compile(r"(?<![\w./-])/workspace(?![\w.-])")


class OutsideWorkspace(ValueError):
    """A sandbox path that does not name something under `/workspace`."""


def atomic_write(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write `data` to `path` so readers see the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, value: dict[str, Any]) -> None:
    atomic_write(path, json.dumps(value, indent=1, sort_keys=True).encode())


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`, or None when the file is absent."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return value


class WorkspaceMap:
    """Translates what a sandbox sees (`/workspace/...`) into real paths under `root`."""

    def __init__(self, root: Path):
        self.root = root

    def host_path(self, sandbox_path: str) -> Path:
        """The real path for an absolute sandbox path under `/workspace` (not resolved)."""
        if not sandbox_path.startswith("/"):
            raise OutsideWorkspace(f"{sandbox_path!r} is not an absolute path")
        normal = posixpath.normpath(sandbox_path)
        if normal == WORKSPACE:
            return self.root
        if not normal.startswith(WORKSPACE + "/"):
            raise OutsideWorkspace(f"{sandbox_path!r} is not under {WORKSPACE}")
        return self.root / normal[len(WORKSPACE) + 1 :]

    def map_text(self, text: str) -> str:
        """`text` (a command or an env value) with each `/workspace` component mapped."""
        return _WORKSPACE_TOKEN.sub(lambda _: str(self.root), text)

    def map_env(self, env: dict[str, str]) -> dict[str, str]:
        return {name: self.map_text(value) for name, value in env.items()}

    def inside(self, real: Path) -> bool:
        """Whether a resolved path is the workspace or below it."""
        root = self.root.resolve()
        return real == root or root in real.parents

    def read_capped(self, sandbox_path: str, max_bytes: int) -> FileRead:
        """Read a file whole, refusing (after a stat, without reading) one over `max_bytes`.

        Symlinks are followed, but a file that resolves outside the workspace is `outside`.
        """
        try:
            real = self.host_path(sandbox_path).resolve()
        except OutsideWorkspace:
            return FileRead(status="outside")
        if not self.inside(real):
            return FileRead(status="outside")
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW)
        except (FileNotFoundError, NotADirectoryError):
            return FileRead(status="missing")
        except OSError:
            # A symlink swapped in after resolve(), or a file we may not open.
            return FileRead(status="missing")
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                return FileRead(status="missing")
            if info.st_size > max_bytes:
                return FileRead(status="too_large", size=info.st_size)
            # The file may grow between fstat and read: read at most one byte past the cap.
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            return FileRead(status="too_large", size=len(data))
        return FileRead(status="ok", size=len(data), data=data)

    def resolve_inside(self, sandbox_path: str) -> Path:
        """The real path for a write: under the workspace even after resolving symlinks."""
        path = self.host_path(sandbox_path)
        real_parent = path.parent.resolve()
        if not self.inside(real_parent):
            raise OutsideWorkspace(f"{sandbox_path!r} resolves outside {WORKSPACE}")
        target = real_parent / path.name
        if target.is_symlink() and not self.inside(target.resolve()):
            raise OutsideWorkspace(f"{sandbox_path!r} resolves outside {WORKSPACE}")
        return target


def merge_tree(source: Path, target: Path) -> None:
    """Copy the folder `source` into `target`, creating it and overwriting files (a merge)."""
    shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
