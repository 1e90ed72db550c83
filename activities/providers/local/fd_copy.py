"""Copy a folder of the worker's into a sandbox by file descriptor, never by path.

Both sides are walked one component at a time from an open folder with O_NOFOLLOW: on the
target side an agent may swap any folder for a symlink to the host while the copy runs, so
every folder is entered with `files.enter`, every file is made with `files.put_file`
(created exclusively, given to the sandbox's user with fchown, renamed over the name), and
nothing is ever chowned or opened by a path string. On the source side no link is followed
out of the source: a symlink is copied as a symlink, and FIFOs, sockets and devices are
skipped (a FIFO would block the copy).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from activities.providers.local.files import enter, open_dir, put_file

_SOURCE_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SOURCE_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1024 * 1024


def copy_into(source: Path, root: Path, parts: list[str], *, owner: int | None) -> None:
    """Merge the folder `source` into `root/parts...` (made when missing): files there are
    replaced, others kept. `NotFollowed` when a folder on the target side is a link (or not
    a folder). The source folder itself may be reached through a link (the spec's author
    names it); nothing below it is."""
    src = os.open(source, _SOURCE_DIR & ~os.O_NOFOLLOW)
    try:
        dst = open_dir(root, parts, create=True, owner=owner)
        try:
            _copy_dir(src, dst, owner)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_dir(src: int, dst: int, owner: int | None) -> None:
    with os.scandir(src) as listing:
        entries = [(entry.name, entry.stat(follow_symlinks=False)) for entry in listing]
    for name, info in entries:
        if stat.S_ISDIR(info.st_mode):
            _copy_subdir(src, dst, name, info, owner)
        elif stat.S_ISREG(info.st_mode):
            _copy_file(src, dst, name, owner)
        elif stat.S_ISLNK(info.st_mode):
            place_link(dst, name, os.readlink(name, dir_fd=src), owner)


def _copy_subdir(src: int, dst: int, name: str, info: os.stat_result, owner: int | None) -> None:
    try:
        inner_src = os.open(name, _SOURCE_DIR, dir_fd=src)
    except OSError:
        return  # gone, or swapped for something else since the listing: not copied
    try:
        # Its permission bits, and always the owner's own (else the copy could not fill it).
        mode = info.st_mode & 0o777 | 0o700
        inner_dst = enter(dst, name, create=True, owner=owner, mode=mode)
        try:
            _copy_dir(inner_src, inner_dst, owner)
        finally:
            os.close(inner_dst)
    finally:
        os.close(inner_src)


def _copy_file(src: int, dst: int, name: str, owner: int | None) -> None:
    try:
        fd = os.open(name, _SOURCE_FILE, dir_fd=src)
    except OSError:
        return
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return

        def fill(out: int) -> None:
            while chunk := os.read(fd, _CHUNK):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
            os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))

        # No set-user-id or sticky bits into a sandbox: the permission bits alone.
        mode = info.st_mode & 0o777
        put_file(dst, name, fill, mode=mode, owner=owner, durable=False)
    finally:
        os.close(fd)


def place_link(folder: int, name: str, target: str, owner: int | None) -> None:
    """Make `name` in the open folder a symlink to `target`: made under a temporary name,
    given to `owner` through an O_PATH descriptor, renamed over `name`."""
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    os.symlink(target, tmp, dir_fd=folder)
    try:
        if owner is not None:
            _give_link(folder, tmp, owner)
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=folder)
        except FileNotFoundError:
            pass
        raise


def _give_link(folder: int, name: str, owner: int) -> None:
    # A symlink cannot be fchowned; its O_PATH descriptor can be through /proc (the same as
    # fchownat with AT_EMPTY_PATH): the link itself changes, never what it points to. Only
    # the link the worker just made: a single link, still the worker's (a host file an agent
    # hard-linked in under that name has other links, or another owner).
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    try:
        info = os.fstat(fd)
        if stat.S_ISLNK(info.st_mode) and info.st_nlink == 1 and info.st_uid == os.geteuid():
            os.chown(f"/proc/self/fd/{fd}", owner, owner)
    finally:
        os.close(fd)
