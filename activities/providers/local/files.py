"""Files for the local engine: atomic writes, `/workspace` mapping, capped reads.

A local sandbox sees its folder's `workspace/` as `/workspace`: mounted there when it is
isolated (see isolation), and otherwise (`isolation: "none"`) by rewriting commands,
working directories and environment values textually, so `/workspace` must appear as its own
path component to be mapped: `/workspace/app` and `"/workspace"` are mapped,
`/home/me/workspace` and `/workspaces` are not. The engine's own reads and writes always go
through `WorkspaceMap.host_path`.
"""

from __future__ import annotations

import errno
import json
import os
import posixpath
import re
import secrets
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from activities.providers.protocol import FileRead

WORKSPACE = "/workspace"
_WORKSPACE_TOKEN = re.compile(r"(?<![\w./-])/workspace(?![\w.-])")


# Folders on a guest path are opened one by one, never through a symlink (an agent could swap
# one in between a check and the use); files the same, and never blocking (a FIFO).
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFLNK: "a symbolic link (not followed)",
}


class OutsideWorkspace(ValueError):
    """A sandbox path that does not name something under `/workspace`."""


class NotFollowed(OutsideWorkspace):
    """A guest path through a symlink (or through something that is not a folder)."""


def open_dir(
    root: Path, parts: list[str], *, create: bool = False, owner: int | None = None
) -> int:
    """A file descriptor of the folder `root/parts...`, reached one component at a time
    without following a symlink on the way (`NotFollowed`); missing folders are made with
    `create`, else `FileNotFoundError`. With `owner`, each folder on the way that is the
    worker's own (made now, or before a crash could give it) becomes `owner`'s through its
    descriptor (see `enter`). The caller closes it."""
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as error:
        if error.errno in (errno.ENOTDIR, errno.ELOOP):
            raise NotFollowed("the workspace is not a folder") from None
        raise
    try:
        for part in parts:
            step = enter(fd, part, create=create, owner=owner)
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def enter(
    fd: int, name: str, *, create: bool = False, owner: int | None = None, mode: int = 0o755
) -> int:
    """The folder `name` in the open folder `fd`, opened without following a link
    (`NotFollowed`), made (with `mode`) when missing and `create`. With `owner` it is given
    to `owner` through the descriptor just opened (`give_fd`), never by name: a name can be
    swapped for a link between two calls, a descriptor cannot."""
    try:
        step = os.open(name, _DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
        try:
            os.mkdir(name, mode, dir_fd=fd)
        except FileExistsError:
            pass
        step = _open_step(name, fd)
    except OSError as error:
        _raise_not_followed(error, name, fd)
        raise
    if owner is not None:
        try:
            give_fd(step, owner)
        except BaseException:
            os.close(step)
            raise
    return step


def give_fd(fd: int, owner: int) -> None:
    """Give the open file or folder `fd` to `owner` when it is still the worker's: what the
    worker made for a sandbox is its user's; what the agent made is left as it is."""
    found = os.fstat(fd).st_uid
    if found == os.geteuid() and found != owner:
        os.fchown(fd, owner, owner)


def _open_step(part: str, fd: int) -> int:
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except OSError as error:
        _raise_not_followed(error, part, fd)
        raise


def _raise_not_followed(error: OSError, part: str, fd: int) -> None:
    if error.errno in (errno.ENOTDIR, errno.ELOOP):
        raise NotFollowed(f"{part!r} on its path is {_kind_at(part, fd)}") from None


def _kind_at(name: str, dir_fd: int) -> str:
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return "gone"
    if stat.S_ISREG(mode):
        return "a file"
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def write_inside(
    root: Path,
    parts: list[str],
    data: bytes,
    *,
    mode: int | None = None,
    owner: int | None = None,
) -> None:
    """Write `root/parts...` atomically with openat discipline: each folder opened (or made)
    relative to the one before without following symlinks, the temporary file created
    exclusively in the last one, renamed over the name there. No swap of a path component
    for a symlink can make this write outside `root`. With `owner` (a root worker's sandbox
    user) the file and the folders made on the way become its own through their descriptors
    (fchown), never by path."""
    if not parts:
        raise OutsideWorkspace("cannot write the workspace folder itself")
    folder = open_dir(root, parts[:-1], create=True, owner=owner)
    try:
        put_file(folder, parts[-1], _writer(data), mode=mode, owner=owner)
    finally:
        os.close(folder)


def put_file(
    folder: int,
    name: str,
    fill: Callable[[int], None],
    *,
    mode: int | None = None,
    owner: int | None = None,
    durable: bool = True,
) -> None:
    """Make the file `name` in the open folder `folder`: a temporary file created there
    exclusively (never through a link), filled by `fill(fd)`, given to `owner` and chmodded
    through its descriptor, then renamed over `name` (a link left at `name` is replaced, not
    followed)."""
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, _CREATE_FLAGS, 0o600, dir_fd=folder)
    try:
        try:
            fill(fd)
            if owner is not None:
                os.fchown(fd, owner, owner)
            if mode is not None:
                os.fchmod(fd, mode)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=folder)
        except FileNotFoundError:
            pass
        raise


def _writer(data: bytes) -> Callable[[int], None]:
    def fill(fd: int) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    return fill


def read_inside(root: Path, parts: list[str], max_bytes: int) -> FileRead:
    """Read `root/parts...` whole, capped, never following a symlink and never blocking: only
    a regular file is read (a FIFO, a folder or a link is `refused`, saying which), one over
    `max_bytes` is `too_large` after a stat alone, and every descriptor is closed."""
    if not parts:
        return FileRead(status="refused", detail="it is a folder")
    try:
        folder = open_dir(root, parts[:-1])
    except FileNotFoundError:
        return FileRead(status="missing")
    except NotFollowed as why:
        return FileRead(status="refused", detail=str(why))
    try:
        name = parts[-1]
        try:
            # Looked at before it is opened: a FIFO or a device is never opened at all.
            found = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return FileRead(status="missing")
        if not stat.S_ISREG(found.st_mode):
            return FileRead(status="refused", detail=f"it is {_kind_at(name, folder)}")
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=folder)
        except FileNotFoundError:
            return FileRead(status="missing")
        except OSError as error:
            # Swapped for a link since the look (ELOOP), or not ours to read.
            return FileRead(status="refused", detail=f"it cannot be opened ({error.strerror})")
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return FileRead(status="refused", detail="it is not a regular file")
        if info.st_size > max_bytes:
            return FileRead(status="too_large", size=info.st_size)
        # The file may grow between fstat and read: read at most one byte past the cap.
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        return FileRead(status="too_large", size=len(data))
    return FileRead(status="ok", size=len(data), data=data)


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

    def parts(self, sandbox_path: str) -> list[str]:
        """The components of a sandbox path below `/workspace` ([] for the workspace)."""
        relative = self.host_path(sandbox_path).relative_to(self.root)
        return [part for part in relative.parts if part not in ("", ".")]

    def read_capped(self, sandbox_path: str, max_bytes: int) -> FileRead:
        """Read a file whole, refusing (after a stat, without reading) one over `max_bytes`.

        No symlink is followed (see `read_inside`): one that leads outside the workspace is
        `outside`, any other `refused`.
        """
        try:
            parts = self.parts(sandbox_path)
        except OutsideWorkspace:
            return FileRead(status="outside")
        read = read_inside(self.root, parts, max_bytes)
        if read.status == "refused" and "symbolic link" in read.detail:
            # Where it leads is only looked up (never opened), to say so.
            if not self.inside(self.host_path(sandbox_path).resolve()):
                return FileRead(status="outside")
        return read

    def write(
        self,
        sandbox_path: str,
        data: bytes,
        *,
        mode: int | None = None,
        owner: int | None = None,
    ) -> None:
        """Write a file atomically under the workspace, through no symlink (`write_inside`);
        OutsideWorkspace when the path leaves it or a component is not a real folder."""
        write_inside(self.root, self.parts(sandbox_path), data, mode=mode, owner=owner)
