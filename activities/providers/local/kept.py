"""What a paused local sandbox holds on its host, let go of when its run no longer needs it,
and brought back when something needs its files (issue 51; see host_holds for what is held).
Mixed into `LocalEngine`.

- A pause with no live process left in the sandbox unmounts its image (`_release_locked`),
  once the launchers of its ended agents are gone (each outlives its agent by a moment).
- `let_go`: a sandbox kept after its run ended ends its agents first (no run wakes them), then
  lets go the same way; files kept.
- `ensure_disk`: what reads, snapshots, runs or wakes the sandbox mounts its image again first;
  `let_go_again` unmounts what this engine mounted so (a CLI's provider does at its close).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from activities.providers.local import disk_image, host_holds
from activities.providers.local import procs as local_procs
from activities.providers.local.state import SandboxMeta
from activities.providers.protocol import ProviderError, SandboxNotFound

# How long the launchers of ended agents may take to record the ends.
RECORD_SECONDS = 5.0
# How long a launcher may live on after recording its agent's end (it ends its network
# helpers, then exits: tens of ms) before a sandbox letting go, or stopping, kills it, and
# then how long the kill may take to land.
LAUNCHER_EXIT_SECONDS = 5.0
# How long the image's loop device may stay attached after its unmount (the kernel detaches
# it when its last user closes it: a mount namespace being torn down, an open of the device).
LOOP_DETACH_SECONDS = 10.0


class KeptSandboxes:
    """Letting go of a paused sandbox's host processes and mounts (`LocalEngine` supplies the
    state and lock helpers)."""

    # Sandboxes that had let go of their image and that this engine mounted again for a read.
    mounted_again: set[str]

    if TYPE_CHECKING:

        def folder(self, sandbox_id: str) -> Path: ...

        def _changing(self, sandbox_id: str) -> AbstractContextManager[SandboxMeta]: ...

        def _save(self, meta: SandboxMeta) -> SandboxMeta: ...

        def _load(self, sandbox_id: str) -> SandboxMeta | None: ...

        def _kept(self, sandbox_id: str) -> bool: ...

        def _procs(self, sandbox_id: str) -> Path: ...

        def _end_processes(self, meta: SandboxMeta) -> None: ...

    def ensure_disk(self, sandbox_id: str) -> None:
        """Mount the sandbox's image where it has one that is not mounted (it let go of it
        while paused, or the host rebooted), unless it is stopped: its files are then there
        for whoever reads or runs."""
        folder = self.folder(sandbox_id)
        if not (folder / disk_image.IMAGE_FILE).is_file():
            return
        if os.path.ismount(folder / disk_image.MOUNT_DIR):
            return
        disk_image.attached(folder, lambda: self._kept(sandbox_id))
        meta = self._load(sandbox_id)
        if meta is not None and meta.released_at is not None:
            self.mounted_again.add(sandbox_id)

    def let_go(self, sandbox_id: str, *, end_agents: bool = False) -> SandboxMeta:
        """A paused sandbox lets go of what it holds on the host (see host_holds): its image
        unmounted once no process of it is alive. `end_agents`: its agents are ended first
        (a sandbox kept after its run ended: no run wakes them; their records say `kept`),
        with its files kept. Anything but a paused sandbox is left as it is."""
        with self._changing(sandbox_id) as meta:
            if meta.state != "paused":
                return meta
            if end_agents and host_holds.agents_alive(meta, self._procs(sandbox_id)):
                # First: each launcher reads why its agent ended.
                meta = self._save(dataclasses.replace(meta, agents_ended_at=time.time()))
                self._end_processes(meta)
                # Their launchers record the ends (and end their helpers) a moment later.
                local_procs.wait_all_ended(self._procs(sandbox_id), timeout=RECORD_SECONDS)
            return self._release_locked(meta)

    def let_go_again(self) -> list[str]:
        """Unmount the images this engine mounted again for a read of a sandbox that had let
        go of it, where that sandbox is still paused; which it unmounted."""
        done = []
        for sandbox_id in sorted(self.mounted_again):
            self.mounted_again.discard(sandbox_id)
            try:
                meta = self.let_go(sandbox_id)
            except ProviderError:
                continue
            if meta.released_at is not None:
                done.append(sandbox_id)
        return done

    def holds(self, sandbox_id: str) -> host_holds.HostHolds:
        """The host processes and mounts the sandbox holds now."""
        meta = self._load(sandbox_id)
        if meta is None:
            raise SandboxNotFound(sandbox_id)
        return host_holds.holds(meta, self.folder(sandbox_id))

    def _release_locked(self, meta: SandboxMeta) -> SandboxMeta:
        """A paused sandbox with no live process lets go of its image's mount (a frozen
        agent keeps it: its run may wake it, and it writes there)."""
        if meta.state != "paused" or host_holds.agents_alive(meta, self._procs(meta.id)):
            return meta
        end_launchers(self._procs(meta.id))
        folder = self.folder(meta.id)
        if meta.disk == "image" and not disk_image.detach_idle(folder):
            return meta  # a file of it open on the host: kept mounted, let go of next time
        self.mounted_again.discard(meta.id)
        # Let go when this returns: its loop device too, not a moment later.
        left = []
        if meta.disk == "image":
            left = disk_image.wait_loops_gone(folder, LOOP_DETACH_SECONDS)
        held = None
        if left:
            held = f"{', '.join(left)} still attached {LOOP_DETACH_SECONDS:g} s after the unmount"
        if meta.released_at is not None and meta.loop_held == held:
            return meta
        released = meta.released_at or time.time()
        return self._save(dataclasses.replace(meta, released_at=released, loop_held=held))


def end_launchers(procs_dir: Path) -> None:
    """See that no launcher of the sandbox's ended agents lives on (a pause letting go, a
    stop): each writes how its agent ended, then ends its network helpers and exits. One still
    there after `LAUNCHER_EXIT_SECONDS` is killed with everything it started: nothing it had
    left to do is a record (see launcher)."""
    give_up = time.monotonic() + LAUNCHER_EXIT_SECONDS
    while (pids := host_holds.launchers(procs_dir)) and time.monotonic() < give_up:
        time.sleep(0.02)
    if not pids:
        return
    doomed = pids | host_holds.descendants(pids)
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    give_up = time.monotonic() + LAUNCHER_EXIT_SECONDS
    while any(local_procs.pid_alive(pid) for pid in doomed) and time.monotonic() < give_up:
        time.sleep(0.02)
