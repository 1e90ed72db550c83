"""A local sandbox's files on an ext4 filesystem of their own: the kernel holds its disk limit.

The image is a sparse file in the sandbox's folder, loop-mounted at `disk/`; the sandbox's
`workspace/`, `home/` and `tmp/` are bind mounts of its folders of the same names, so every
path the engine, bubblewrap and the agent use stays what it was::

    sandboxes/<name>/disk.img     the filesystem (sparse: the host holds only what was written)
    sandboxes/<name>/disk/        where it is mounted (loop, nosuid, nodev, noatime, discard)
    sandboxes/<name>/workspace/   = disk/workspace, and home/, tmp/ likewise

`mkfs.ext4` makes it in milliseconds (inode tables and journal initialised lazily) with one
inode per 16 KiB of the limit and no blocks reserved for root; `discard` gives the host back
what the agent deletes. A loop mount outlives the worker that made it (a crash, a restart): the
next worker finds it mounted. A stop unmounts it (`detach`) before the folder is deleted, and
`overnight reap` unmounts what a killed process left mounted; after a reboot, `attached`
mounts a kept sandbox's image again.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from activities.providers.protocol import ProviderError

IMAGE_FILE = "disk.img"
MOUNT_DIR = "disk"
FOLDERS = ("workspace", "home", "tmp")
LOCK_FILE = ".disk.lock"
MIB = 1024 * 1024
_MKFS_OPTIONS = "lazy_itable_init=1,lazy_journal_init=1,nodiscard"
_MOUNT_OPTIONS = "loop,nosuid,nodev,noatime,discard"
_MS_NOSUID, _MS_NODEV, _MS_NOATIME = 0x2, 0x4, 0x400
_MS_REMOUNT, _MS_BIND = 0x20, 0x1000
_MNT_DETACH = 0x2
_COMMAND_SECONDS = 60
log = logging.getLogger(__name__)
_libc = ctypes.CDLL(None, use_errno=True)
_probe_lock = threading.Lock()
_probed: dict[str, str | None] = {}
_attach_lock = threading.Lock()


def unavailable(home: Path) -> str | None:
    """Why this worker cannot give sandboxes an image (None: it can), found once per process
    by making, mounting and unmounting a small one under `home`."""
    key = str(home)
    with _probe_lock:
        if key not in _probed:
            _probed[key] = _probe(home)
        return _probed[key]


def _probe(home: Path) -> str | None:
    if os.geteuid() != 0:
        return "the worker is not root (loop mounts need root)"
    if not os.path.exists("/dev/loop-control"):
        return "there is no /dev/loop-control"
    for tool in ("mkfs.ext4", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    folder = home / f".disk-probe-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        attach(folder, 16, folders=())
    except (OSError, ProviderError) as error:
        return f"a loop-mounted image cannot be made here ({error})"
    finally:
        detach(folder)
        shutil.rmtree(folder, ignore_errors=True)
    return None


def attach(folder: Path, mib: int, *, folders: tuple[str, ...] = FOLDERS) -> None:
    """Make `folder`'s image of `mib` MiB and mount it, with `folders` bound beside it. What
    a create cut short left there is unmounted and made again."""
    detach(folder)
    image = folder / IMAGE_FILE
    image.unlink(missing_ok=True)
    try:
        fd = os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.ftruncate(fd, mib * MIB)
        finally:
            os.close(fd)
        entries = max(1024, mib * MIB // (16 * 1024))
        _command(
            ["mkfs.ext4", "-q", "-F", "-m", "0", "-N", str(entries), "-E", _MKFS_OPTIONS]
            + ["-L", "overnight", str(image)]
        )
        _mount_and_bind(folder, folders)
    except BaseException:
        detach(folder)
        image.unlink(missing_ok=True)
        raise


def attached(
    folder: Path, wanted: Callable[[], bool], *, folders: tuple[str, ...] = FOLDERS
) -> None:
    """Mount the image of a sandbox that has one (or of a run's store: `folders` none), if it
    is not mounted (after a reboot) and is still `wanted` (not stopped: asked under the lock a
    stop unmounts under, so a stop and this never cross). Under an flock of its own, so two
    processes never mount it twice; a process that may not mount (a CLI run by another user)
    leaves it as it is, saying so."""
    if not (folder / IMAGE_FILE).is_file() or os.path.ismount(folder / MOUNT_DIR):
        return
    try:
        with _attach_lock, _locked(folder):
            if wanted() and not os.path.ismount(folder / MOUNT_DIR):
                detach(folder)
                _mount_and_bind(folder, folders)
    except (OSError, ProviderError) as error:
        log.warning("%s: its disk image is not mounted: %s", folder, error)


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    with open(folder / LOCK_FILE, "ab") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        yield


def _mount_and_bind(folder: Path, folders: tuple[str, ...]) -> None:
    mount_dir = folder / MOUNT_DIR
    mount_dir.mkdir(mode=0o700, exist_ok=True)
    _command(
        ["mount", "-t", "ext4", "-o", _MOUNT_OPTIONS, str(folder / IMAGE_FILE), str(mount_dir)]
    )
    for name in folders:
        inside, outside = mount_dir / name, folder / name
        inside.mkdir(mode=0o755, exist_ok=True)
        outside.mkdir(mode=0o755, exist_ok=True)
        _syscall_mount(inside, outside, _MS_BIND)
        flags = _MS_REMOUNT | _MS_BIND | _MS_NOSUID | _MS_NODEV | _MS_NOATIME
        _syscall_mount(None, outside, flags)


def detach(folder: Path, *, locked: bool = False) -> list[Path]:
    """Unmount everything mounted at or below `folder`, deepest first (lazily when busy: it
    is then freed when its last user goes), its filesystems written back first. What was
    mounted. `locked`: under the lock `attached` mounts under (a stop's)."""
    if locked:
        with _locked(folder):
            return detach(folder)
    found = mounts_under(folder)
    _write_back(found)
    for point in sorted(found, key=lambda p: len(p.parts), reverse=True):
        if _libc.umount2(os.fsencode(point), 0) == 0:
            continue
        code = ctypes.get_errno()
        if code == errno.EBUSY:
            _libc.umount2(os.fsencode(point), _MNT_DETACH)
    return found


def _write_back(points: list[Path]) -> None:
    """Write what each filesystem mounted at `points` holds in memory to its image (`syncfs`),
    so the image file holds it when this returns. An unmount does it only when it drops the
    filesystem's last mount: a copy of the mount in another mount namespace (any process that
    made one while the image was mounted: another sandbox's bubblewrap setting up, an
    `unshare`; this host's mounts propagate to none) or a lazy unmount keeps it alive, its
    writes not yet in the image, which callers then measure and delete."""
    synced: set[int] = set()
    for point in points:
        try:
            fd = os.open(point, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            device = os.fstat(fd).st_dev
            if device not in synced:
                synced.add(device)
                _libc.syncfs(fd)
        finally:
            os.close(fd)


def detach_idle(folder: Path) -> bool:
    """Unmount the image and the folders bound from it, only if none is in use (never
    lazily: a mount left alive by an open file while the image is mounted again elsewhere
    would be two writers of one filesystem). True when nothing is mounted any more; False
    leaves it mounted as it was. Under the lock `attached` mounts under."""
    with _locked(folder):
        unbound: list[str] = []
        for name in FOLDERS:
            point = folder / name
            if not os.path.ismount(point):
                continue
            if _libc.umount2(os.fsencode(point), 0) != 0:
                _bind_again(folder, unbound)
                return False
            unbound.append(name)
        mount_dir = folder / MOUNT_DIR
        if os.path.ismount(mount_dir) and _libc.umount2(os.fsencode(mount_dir), 0) != 0:
            _bind_again(folder, unbound)
            return False
        return not mounts_under(folder)


def _bind_again(folder: Path, names: list[str]) -> None:
    for name in names:
        _syscall_mount(folder / MOUNT_DIR / name, folder / name, _MS_BIND)
        flags = _MS_REMOUNT | _MS_BIND | _MS_NOSUID | _MS_NODEV | _MS_NOATIME
        _syscall_mount(None, folder / name, flags)


def mounts_under(root: Path) -> list[Path]:
    """Mount points at or below `root`, from this process's mount table (stacked ones once
    each time they are stacked)."""
    top = os.path.abspath(root)
    found = []
    try:
        table = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return []
    for line in table.splitlines():
        fields = line.split(" ")
        if len(fields) < 5:
            continue
        point = _unescape(fields[4])
        if point == top or point.startswith(top.rstrip("/") + "/"):
            found.append(Path(point))
    return found


def loops_of(folder: Path) -> list[str]:
    """The loop devices (`loop3`) backed by `folder`'s image, mounted or not: one stays
    attached after its last unmount until its last user closes it (a mount namespace still
    being torn down, an open of the device), a moment later."""
    image = os.fsencode(os.path.abspath(folder / IMAGE_FILE))
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            text = backing.read_bytes().rstrip(b"\n")
        except OSError:
            continue
        if text == image:
            found.append(backing.parent.parent.name)
    return sorted(found)


def foreign_copies(loops: list[str]) -> list[str]:
    """Those of `loops` mounted in the mount namespace of some live process but not in this
    one: a copy that namespace took while the image was mounted (another sandbox's bubblewrap
    setting up, an `unshare`; this host's mounts propagate to none). It lives as long as that
    process does, which nothing the sandbox does can end."""
    devices: dict[str, str] = {}
    for name in loops:
        try:
            devices[(Path("/sys/block") / name / "dev").read_text().strip()] = name
        except OSError:
            continue
    here = _mounted_devices("self")
    copied: set[str] = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and len(copied) < len(devices):
            copied |= _mounted_devices(entry) & devices.keys()
    return sorted(devices[device] for device in copied - here)


def _mounted_devices(pid: str) -> set[str]:
    try:
        table = Path(f"/proc/{pid}/mountinfo").read_text()
    except OSError:
        return set()
    return {fields[2] for line in table.splitlines() if len(fields := line.split(" ")) > 2}


def wait_loops_gone(folder: Path, timeout: float) -> list[str]:
    """After the last unmount of `folder`'s image: wait up to `timeout` for its loop devices
    to be detached (the kernel does it when its last user closes it, which lags the unmount
    under load). Those still attached then, but for copies in other programs' namespaces."""
    give_up = time.monotonic() + timeout
    while True:
        left = loops_of(folder)
        if left:
            left = sorted(set(left) - set(foreign_copies(left)))
        if not left or time.monotonic() >= give_up:
            return left
        time.sleep(0.02)


def in_use(folder: Path) -> tuple[int, int] | None:
    """(bytes, files and folders) the mounted image holds (None: not mounted)."""
    mount_dir = folder / MOUNT_DIR
    if not os.path.ismount(mount_dir):
        return None
    info = os.statvfs(mount_dir)
    used = (info.f_blocks - info.f_bfree) * info.f_frsize
    return used, info.f_files - info.f_ffree


def _syscall_mount(source: Path | None, target: Path, flags: int) -> None:
    src = None if source is None else os.fsencode(source)
    if _libc.mount(src, os.fsencode(target), None, flags, None) != 0:
        code = ctypes.get_errno()
        raise ProviderError(f"cannot mount {target}: {os.strerror(code)}", kind="DiskImageFailed")


def _command(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=_COMMAND_SECONDS)
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["failed"]
        raise ProviderError(f"{argv[0]}: {detail[0]}", kind="DiskImageFailed")


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo.
    out, i = [], 0
    while i < len(field):
        code = field[i + 1 : i + 4]
        if field[i] == "\\" and len(code) == 3 and code.isdigit():
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)
