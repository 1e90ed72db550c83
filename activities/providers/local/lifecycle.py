"""A local sandbox's life after its create: paused (its cgroup frozen), woken with a fresh
lease, stopped (its processes killed, its disk freed but for a tombstone), its lease moved or
ended, its labels and model cap set. Mixed into `LocalEngine`.

Every change holds the sandbox's lock (`_changing`), which first ends an expired lease the way
the sandbox asked (`on_lease_end`): so the lease is enforced by every engine access, besides
each agent's launcher at the deadline.
"""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from activities.providers.local import cgroup_plan as local_cgroup_plan
from activities.providers.local import cgroups as local_cgroups
from activities.providers.local import disk as local_disk
from activities.providers.local import disk_image
from activities.providers.local import procs as local_procs
from activities.providers.local.kept import end_launchers
from activities.providers.local.state import LEASE_EXPIRED, SandboxMeta, invalid_request
from activities.providers.protocol import ProviderError, SandboxNotRunning

# Like Runtime: `extend` moves the end at most this far ahead of now.
MAX_AHEAD_SECONDS = 24 * 3600
# A pause without a cgroup ends the agents: how long their launchers may take to record it.
PAUSE_KILL_SECONDS = 5.0


class SandboxLifecycle:
    """Pause, wake, stop, extend and relabel (`LocalEngine` supplies the state and lock
    helpers, `KeptSandboxes` the disk's mount and release)."""

    trash_dir: Path
    mounted_again: set[str]

    if TYPE_CHECKING:

        def folder(self, sandbox_id: str) -> Path: ...

        def _changing(self, sandbox_id: str) -> AbstractContextManager[SandboxMeta]: ...

        def _save(self, meta: SandboxMeta) -> SandboxMeta: ...

        def _procs(self, sandbox_id: str) -> Path: ...

        def ensure_disk(self, sandbox_id: str) -> None: ...

        def _release_locked(self, meta: SandboxMeta) -> SandboxMeta: ...

    def pause(self, sandbox_id: str, *, reason: str = "requested") -> SandboxMeta:
        """Freeze the sandbox's cgroup (without one: end its agents, files kept). Pausing a
        paused or stopped sandbox changes nothing."""
        with self._changing(sandbox_id) as meta:
            return self._pause_locked(meta, reason)

    def wake(self, sandbox_id: str, timeout_seconds: float | None = None) -> SandboxMeta:
        """Thaw a paused sandbox's cgroup, with a fresh lease: `timeout_seconds` (else
        the one it was created with) from now, or the lease it paused with if that ends later.
        Waking a running sandbox changes nothing."""
        with self._changing(sandbox_id) as meta:
            if meta.state != "paused":
                return meta
            lease = timeout_seconds if timeout_seconds is not None else meta.fresh_lease()
            deadline = meta.deadline
            if lease is not None:
                deadline = max(deadline or 0.0, time.time() + lease)
            if meta.freezer in local_cgroups.FROZEN_KINDS and meta.cgroup is not None:
                local_cgroups.thaw(meta.freezer, meta.cgroup)
            elif meta.freezer == local_cgroups.SIGNALS:
                local_procs.signal_all(self._procs(sandbox_id), signal.SIGCONT)
            self.ensure_disk(sandbox_id)  # one that let go of its image has it back
            self.mounted_again.discard(sandbox_id)
            return self._save(
                dataclasses.replace(
                    meta,
                    state="running",
                    deadline=deadline,
                    paused_at=None,
                    pause_reason=None,
                    released_at=None,
                    agents_ended_at=None,
                    loop_held=None,
                )
            )

    def set_model_cap(self, sandbox_id: str, cap_usd: float | None) -> bool:
        """The gateway's cap on the run's model spend for this sandbox's next calls; False when
        it has no model entry."""
        with self._changing(sandbox_id) as meta:
            if meta.model is None:
                return False
            self._save(dataclasses.replace(meta, model={**meta.model, "cap_usd": cap_usd}))
            return True

    def resume(self, sandbox_id: str) -> SandboxMeta:
        """Runtime's wake on request: the same as `wake` with the sandbox's own lease."""
        return self.wake(sandbox_id)

    def stop(self, sandbox_id: str, *, reason: str = "stopped") -> SandboxMeta:
        """Mark the sandbox stopped, kill every process of it (done when its cgroups are empty:
        `StopIncomplete` if they stay busy) and free its disk (a tombstone stays). Stopping a
        stopped one changes nothing but finishing a stop cut short: its kill, its freeing."""
        with self._changing(sandbox_id) as meta:
            return self._stop_locked(meta, reason)

    def extend(self, sandbox_id: str, seconds: float) -> SandboxMeta:
        """Move the deadline `seconds` later (at most 24 h from now)."""
        if seconds <= 0:
            raise invalid_request("extend needs a positive number of seconds")
        with self._changing(sandbox_id) as meta:
            if meta.state == "stopped":
                raise SandboxNotRunning(sandbox_id, meta.state)
            if meta.deadline is None:
                return meta
            deadline = min(meta.deadline + seconds, time.time() + MAX_AHEAD_SECONDS)
            timeout = deadline - meta.created_at
            return self._save(dataclasses.replace(meta, deadline=deadline, timeout_seconds=timeout))

    def set_labels(self, sandbox_id: str, labels: Mapping[str, str]) -> SandboxMeta:
        """Set these labels (the others stay), whatever the sandbox's state."""
        with self._changing(sandbox_id) as meta:
            return self._save(dataclasses.replace(meta, labels={**meta.labels, **labels}))

    def set_lease_end(self, sandbox_id: str, at: float) -> SandboxMeta:
        """Move a running sandbox's lease end to `at` (Unix seconds), sooner or later: time
        passing, for tests and the fake Runtime API (whose clients may only ask 60..3600 s)."""
        with self._changing(sandbox_id) as meta:
            return self._save(dataclasses.replace(meta, deadline=at))

    # ----- under the sandbox's lock -----

    def _lease_end_locked(self, meta: SandboxMeta) -> SandboxMeta:
        if meta.on_lease_end == "pause":
            return self._pause_locked(meta, LEASE_EXPIRED)
        return self._stop_locked(meta, LEASE_EXPIRED)

    def _pause_locked(self, meta: SandboxMeta, reason: str) -> SandboxMeta:
        if meta.state != "running":
            return meta
        paused = dataclasses.replace(
            meta, state="paused", paused_at=time.time(), pause_reason=reason
        )
        if meta.pause_ends_agents():
            self._save(paused)  # first: each launcher records why its agent ended
        self._hold(meta)
        return self._release_locked(self._save(paused))

    def _stop_locked(self, meta: SandboxMeta, reason: str) -> SandboxMeta:
        if meta.state != "stopped":
            meta = self._save(
                dataclasses.replace(
                    meta, state="stopped", stop_reason=reason, stopped_at=time.time()
                )
            )
        # On every stop, not only the first: one cut short (a killed worker) left them running.
        self._end_processes(meta)
        # Their launchers too, which outlive their agents by a moment: none runs on once the
        # stop returns, nor writes into a folder moved to the trash.
        end_launchers(self._procs(meta.id))
        if meta.cgroups:
            # Again on every stop: one cut short (a killed worker) left them.
            local_cgroup_plan.discard(meta.freezer, meta.cgroups, meta.systemd_slice)
        if meta.freed_at is not None:
            return meta
        if meta.disk == "image":
            disk_image.detach(self.folder(meta.id), locked=True)  # disk.img goes with the rest
        with local_disk.trash_entry(self.trash_dir, meta.id) as entry:
            size = local_disk.move_out(self.folder(meta.id), entry)
            freed = self._save(dataclasses.replace(meta, freed_at=time.time(), freed_bytes=size))
            local_disk.remove_tree(entry)
        return freed

    def _end_processes(self, meta: SandboxMeta) -> None:
        """Kill every process of a stopped sandbox and see that none is left (`StopIncomplete`
        otherwise: it stays stopped but not freed, and the next stop kills again)."""
        procs = self._procs(meta.id)
        ended = True
        if meta.freezer in local_cgroups.FROZEN_KINDS and meta.cgroup is not None:
            # Everything in its cgroups, however it forks; the namespaces' kill below is for
            # sandboxes made before cgroups.
            ended = local_cgroups.kill(meta.freezer, meta.cgroup, list(meta.cgroups))
        local_procs.signal_all(procs, signal.SIGKILL)
        # Give the launchers a moment to record the kills, so a reader sees `killed` at once.
        local_procs.wait_all_ended(procs, timeout=2.0)
        if not ended:
            raise ProviderError(
                f"sandbox {meta.id}: processes still run in its cgroup {meta.cgroup} after "
                f"{local_cgroups.KILL_SECONDS:g} s of SIGKILLs",
                kind="StopIncomplete",
            )

    def _hold(self, meta: SandboxMeta) -> None:
        """Hold every process of a running sandbox that is being paused: its cgroup frozen,
        and the freeze done; without one, its agents ended (nothing is ever paused
        unmetered); sandboxes made before cgroups, SIGSTOPped."""
        procs = self._procs(meta.id)
        if meta.freezer in local_cgroups.FROZEN_KINDS and meta.cgroup is not None:
            try:
                local_cgroups.freeze(meta.freezer, meta.cgroup)
            except local_cgroups.FreezeTimeout as error:
                # Left frozen as far as it got, and still running: a retry freezes again.
                raise ProviderError(str(error), kind="FreezeTimeout") from None
        elif meta.pause_ends_agents():
            local_procs.signal_all(procs, signal.SIGKILL)
            local_procs.wait_all_ended(procs, timeout=PAUSE_KILL_SECONDS)
        else:
            local_procs.signal_all(procs, signal.SIGSTOP)
