"""How much a local sandbox's files may hold, and how that is enforced on this worker.

A sandbox's workspace, home and `/tmp` are limited to `disk_mib` (the spec's, else the worker's
`OVERNIGHT_SANDBOX_DISK_MIB`, default 16 GiB) and to one file or folder per 16 KiB of it
(100,000 empty folders fill no disk, but an inode table):

- **image**: the three folders live on an ext4 filesystem of their own, a sparse file
  `disk.img` in the sandbox's folder loop-mounted (see disk_image): the kernel refuses a write
  past the limit (`ENOSPC`) and the host loses at most `disk_mib`. Needs a root worker that
  may mount loop devices (`/dev/loop-control`, `mkfs.ext4`, `mount`);
- **watch**: elsewhere, the worker measures the folders while it watches the agent and pauses
  the sandbox once they pass the limit (see disk_watch): the run then needs attention, with
  `disk limit of N MiB reached` as its reason. After the fact, so an agent may write past the
  limit for up to one measuring interval;
- **none**: `OVERNIGHT_SANDBOX_DISK=off`.

`OVERNIGHT_SANDBOX_DISK` picks: `auto` (default: image where the worker can mount one, else
watch), `image` (refuse to make a sandbox otherwise), `watch` or `off`.

Whatever the mode, the worker keeps a floor of free space on `$OVERNIGHT_HOME`'s filesystem
(`OVERNIGHT_MIN_FREE_MIB`, default 2048; 0: none) for the dev server's database, logs and
the sandboxes already running: below it, no new sandbox is made (`LowDiskSpace`, retryable:
the create is retried with backoff, and the run needs attention if room never comes), and the
sandboxes the worker watches are paused (host_floor).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from activities.providers.local import disk_image
from activities.providers.protocol import ProviderError
from overnight.core.model_base import MAX_DISK_MIB, MIN_DISK_MIB

DiskMode = Literal["image", "watch", "none"]
DISK_ENV = "OVERNIGHT_SANDBOX_DISK"
DISK_MIB_ENV = "OVERNIGHT_SANDBOX_DISK_MIB"
MIN_FREE_ENV = "OVERNIGHT_MIN_FREE_MIB"
DEFAULT_DISK_MIB = 16 * 1024
DEFAULT_MIN_FREE_MIB = 2048
# One file or folder per this many bytes of the limit (mkfs.ext4's own default ratio).
BYTES_PER_ENTRY = 16 * 1024
MIB = 1024 * 1024
_MODES = ("auto", "image", "watch", "off")
LOW_DISK = "LowDiskSpace"


@dataclass(frozen=True)
class DiskPlan:
    """How one sandbox's disk is limited: `mode`, and `mib` (None with mode "none")."""

    mode: DiskMode
    mib: int | None

    @property
    def entries(self) -> int | None:
        """The most files and folders it may hold."""
        return None if self.mib is None else entries_for(self.mib)


def entries_for(mib: int) -> int:
    return max(1024, mib * MIB // BYTES_PER_ENTRY)


def plan(disk_mib: int | None, home: Path, environ: Mapping[str, str] | None = None) -> DiskPlan:
    """The plan for a new sandbox asking `disk_mib` (None: the worker's default); refused
    (InvalidRequest) for a setting that cannot be read or an image this worker cannot make."""
    env = os.environ if environ is None else environ
    mode = env.get(DISK_ENV, "").strip().lower() or "auto"
    if mode not in _MODES:
        raise _bad_setting(f"{DISK_ENV}={mode!r} is not one of {', '.join(_MODES)}")
    if mode == "off":
        return DiskPlan("none", None)
    mib = disk_mib if disk_mib is not None else default_mib(env)
    if mode == "watch":
        return DiskPlan("watch", mib)
    why_not = disk_image.unavailable(home)
    if why_not is None:
        return DiskPlan("image", mib)
    if mode == "image":
        raise _bad_setting(f"{DISK_ENV}=image, but {why_not} (set {DISK_ENV}=watch or auto)")
    return DiskPlan("watch", mib)


def default_mib(environ: Mapping[str, str] | None = None) -> int:
    text = (os.environ if environ is None else environ).get(DISK_MIB_ENV, "").strip()
    if not text:
        return DEFAULT_DISK_MIB
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not MIN_DISK_MIB <= value <= MAX_DISK_MIB:
        raise _bad_setting(
            f"{DISK_MIB_ENV}={text!r} must be a number of MiB, {MIN_DISK_MIB} to {MAX_DISK_MIB}"
        )
    return value


def min_free_mib(environ: Mapping[str, str] | None = None) -> int:
    text = (os.environ if environ is None else environ).get(MIN_FREE_ENV, "").strip()
    if not text:
        return DEFAULT_MIN_FREE_MIB
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise _bad_setting(f"{MIN_FREE_ENV}={text!r} must be a number of MiB (0: no floor)")
    return value


def require_room(home: Path, environ: Mapping[str, str] | None = None) -> None:
    """Refuse a new sandbox while `home`'s filesystem has less free than the floor."""
    floor = min_free_mib(environ)
    if floor == 0:
        return
    free = free_mib(home)
    if free < floor:
        raise ProviderError(
            f"only {free} MiB free on the filesystem of {home}, under this worker's floor of "
            f"{floor} MiB ({MIN_FREE_ENV}): no new sandbox until there is room (retried; "
            "`overnight disk` shows what holds it, `overnight reap` frees what ended)",
            kind=LOW_DISK,
            retryable=True,
        )


def free_mib(home: Path) -> int:
    """The MiB free on `home`'s filesystem (of its parent while it is not made yet)."""
    where = home if home.is_dir() else home.parent
    return shutil.disk_usage(where).free // MIB


def worker_summary(home: Path, environ: Mapping[str, str] | None = None) -> str:
    """What this worker's settings give local sandboxes, for its log at start; ValueError
    (the worker does not start) for a setting it cannot read."""
    try:
        found = plan(None, home, environ)
        floor = min_free_mib(environ)
    except ProviderError as error:
        raise ValueError(str(error)) from None
    limit = describe(found.mode, found.mib).removeprefix("disk ")
    room = f"no new sandbox under {floor} MiB free" if floor else "no floor of free space"
    return f"{limit} unless a spec says (disk_mib); {room}"


def describe(mode: str, mib: int | None) -> str:
    """The disk clause of a sandbox's status line."""
    if mode == "image" and mib is not None:
        return f"disk at most {mib} MiB (its own ext4 image)"
    if mode == "watch" and mib is not None:
        return f"disk at most {mib} MiB (measured: paused past it)"
    return "disk not limited"


def _bad_setting(message: str) -> ProviderError:
    return ProviderError(message, kind="InvalidRequest", retryable=False)
