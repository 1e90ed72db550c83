"""A run's own writable folder on the worker, shown in each of its sandboxes and outliving them
(a coding agent's session store: a writable `WorkerMount`, activities.coding_agent.setup),
held inside the sandbox's disk limit like the workspace.

The store is there so a new sandbox of the run resumes the same session after the old one
crashed, stopped, or was deleted: it cannot live on a sandbox's own image, which a stop
deletes. So it is a folder of the run's, `$OVERNIGHT_HOME/sessions/<run_id>/`, limited the way
the run's sandboxes are (disk_limit's plan):

- **image**: an ext4 image of its own, `disk.img` there, loop-mounted at `disk/` (made at the
  run's first sandbox, mounted again after a reboot), the store its folder `disk/store`. Its
  size, `share_mib`, is carved out of `disk_mib`: the sandbox's own image gets the rest, so a
  running sandbox and its store together hold at most `disk_mib` on the host, and at most one
  file or folder per 16 KiB of each. Past it a write fails inside (`ENOSPC`). What is bound is
  `disk/store`, a folder only the mounted image holds: an image that is not mounted binds
  nothing (`ready`), never the host folder beneath it.
- **watch**: a plain folder `store/`, measured with the sandbox's own folders against
  `disk_mib` (disk_watch). A store found past its share when a sandbox is made is emptied
  first, so a new sandbox does not start over its limit for ever (the adapter then starts a
  new session, seeded from the checkpoint).
- **none**: a plain folder, not limited (`OVERNIGHT_SANDBOX_DISK=off`).

The run frees it when it ends (`free`, from the `free_run_store` activity); `overnight reap`
frees those of runs that ended without doing so. A failed attempt's sandbox kept paused for a
look still shows the store it had: unmounted and deleted on the worker, its blocks go back to
the host when that sandbox goes (`keep_failed_days`).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from activities.providers.local import disk as local_disk
from activities.providers.local import disk_image
from activities.providers.local.disk_limit import MIB, DiskPlan, entries_for
from activities.providers.local.disk_measure import measure_roots
from activities.providers.local.state import invalid_request

STORE_DIR = "store"
LOCK_FILE = ".store.lock"
# A store's share of `disk_mib`: an eighth, at least 16 MiB (of a 64 MiB sandbox, the smallest)
# and at most 1 GiB (a session transcript holds megabytes; 64 MiB is the most Runtime carries).
SHARE_DIVISOR = 8
MIN_SHARE_MIB = 16
MAX_SHARE_MIB = 1024


def share_mib(disk_mib: int) -> int:
    """How much of a sandbox's `disk_mib` its run's store may hold."""
    return min(MAX_SHARE_MIB, max(MIN_SHARE_MIB, disk_mib // SHARE_DIVISOR))


def prepare(folder: Path, plan: DiskPlan, uid: int | None, trash: Path) -> dict[str, Any]:
    """Make the run's store at `folder` ready for a new sandbox of the run (kept as it is when
    it exists), held as `plan` holds the sandbox; what the sandbox's record keeps of it
    (`source`, the folder bound; `store`, `folder`; `store_mib`; `store_image`)."""
    if folder.is_symlink():
        raise invalid_request(f"run store {folder}: a link, not a folder")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    mib = share_mib(plan.mib) if plan.mib is not None else None
    with _locked(folder):
        if plan.mode == "image" and mib is not None:
            bound = _mounted_image(folder, mib) / STORE_DIR
        else:
            bound = folder / STORE_DIR
            if plan.mode == "watch" and mib is not None:
                _emptied_if_over(bound, mib, trash)
        _private_folder(bound, uid)
    return {
        "source": str(bound),
        "store": str(folder),
        "store_mib": mib,
        "store_image": plan.mode == "image",
    }


def own_image_mib(plan_mib: int, recorded: Sequence[Mapping[str, Any]]) -> int:
    """What the sandbox's own image may hold: its `disk_mib` less its run's stores on images."""
    carved = sum(int(m["store_mib"]) for m in recorded if m.get("store_image"))
    return plan_mib - carved


def ready(recorded: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The sandbox's worker mounts as a command may bind them now: a store's image mounted
    again where it is not (after a reboot); a store whose folder is not there (its image
    cannot be mounted, or the run freed it) left out, so the host folder beneath is never
    bound in its place."""
    usable: list[dict[str, Any]] = []
    for mount in recorded:
        if mount.get("store_image"):
            folder = Path(str(mount["store"]))
            if not os.path.ismount(folder / disk_image.MOUNT_DIR):
                disk_image.attached(folder, lambda: True, folders=())
        if mount.get("store") and not os.path.isdir(str(mount["source"])):
            continue
        usable.append(dict(mount))
    return usable


def measured(recorded: Sequence[Mapping[str, Any]]) -> list[Path]:
    """The stores no image holds, measured with the sandbox (disk_watch)."""
    return [Path(str(m["source"])) for m in recorded if m.get("store") and not m.get("store_image")]


def describe(recorded: Sequence[Mapping[str, Any]]) -> str:
    """The store's clause of the sandbox's disk words ("" without one)."""
    for mount in recorded:
        if not mount.get("store"):
            continue
        where = mount.get("target", "its store")
        if mount.get("store_image"):
            return f"; {mount['store_mib']} MiB of it for {where} (an ext4 image of the run's)"
        if mount.get("store_mib") is not None:
            return f"; {where} measured with it"
        return f"; {where} not limited"
    return ""


def free(folder: Path, trash: Path) -> int:
    """Delete the run's store: its image unmounted (lazily, while a sandbox kept paused still
    shows it) and deleted with the folder, crash-safely through the trash. The bytes it held
    on the host (an image as the file it is)."""
    if folder.is_symlink() or not folder.is_dir():
        return 0
    with _locked(folder):
        disk_image.detach(folder, locked=True)
        held = local_disk.tree_bytes(folder)
        local_disk.throw_away(folder, trash)
    return held


def _mounted_image(folder: Path, mib: int) -> Path:
    """The store's image mounted (made when there is none, or made again when the one there
    cannot be mounted: a create killed while making it); where it is mounted."""
    mounted = folder / disk_image.MOUNT_DIR
    if (folder / disk_image.IMAGE_FILE).is_file():
        disk_image.attached(folder, lambda: True, folders=())
    if not os.path.ismount(mounted):
        disk_image.attach(folder, mib, folders=())
    return mounted


def _emptied_if_over(bound: Path, mib: int, trash: Path) -> None:
    if not bound.is_dir() or bound.is_symlink():
        return
    found = measure_roots([bound], mib * MIB, entries_for(mib))
    if found.over:
        local_disk.throw_away(bound, trash)


def _private_folder(path: Path, uid: int | None) -> None:
    """The store itself: the sandbox's user's, private to it. Its parents are the worker's,
    which no agent reaches (only the store is bound), so a path is safe here."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    if path.is_symlink() or not path.is_dir():
        raise invalid_request(f"run store {path}: not a folder")
    if uid is not None and os.lstat(path).st_uid != uid:
        os.chown(path, uid, uid, follow_symlinks=False)


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    with open(folder / LOCK_FILE, "ab") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        yield
