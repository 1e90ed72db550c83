"""Making a local sandbox: its folders (on an image of its own where its disk is limited),
its own user and cgroup, its way out (the gateway's port alone, or the host's network), the
worker's folders it is shown, and its first state. Mixed into `LocalEngine`.

Creates are serialized by one lock over all sandboxes (`.create.lock`), so a name is made
once however many workers ask for it at the same moment.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from activities.gateway import service as gateway_service
from activities.providers.local import cgroup_plan as local_cgroup_plan
from activities.providers.local import (
    disk_image,
    disk_limit,
    netns,
    run_store,
    worker_mounts,
)
from activities.providers.local import isolation as local_isolation
from activities.providers.local import limits as local_limits
from activities.providers.local.files import open_dir, write_inside
from activities.providers.local.mounts import RESOLV_CONF
from activities.providers.local.state import LeaseEnd, SandboxMeta, flock, invalid_request
from activities.providers.protocol import ProviderError, WorkerMount
from overnight.core.constants import LABEL_RUN
from overnight.core.isolation import HostBind, Isolation


class SandboxCreation:
    """`get_or_create` (`LocalEngine` supplies the folders and the state helpers)."""

    home: Path
    sandboxes_dir: Path
    trash_dir: Path

    if TYPE_CHECKING:

        def folder(self, sandbox_id: str) -> Path: ...

        def find(self, sandbox_id: str) -> SandboxMeta | None: ...

        def _save(self, meta: SandboxMeta) -> SandboxMeta: ...

    def get_or_create(
        self,
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        timeout_seconds: float | None = 3600,
        vcpu: int = 2,
        memory_mib: int = 4096,
        disk_mib: int | None = None,
        on_lease_end: LeaseEnd = "pause",
        isolation: Isolation = "bubblewrap",
        binds: Sequence[HostBind] = (),
        host_ports: Sequence[int] = (),
        network: str = "own",
        egress: Sequence[str] | None = None,
        origin: Mapping[str, str] | None = None,
        origin_bind: HostBind | None = None,
        model: Mapping[str, Any] | None = None,
        mounts: Sequence[WorkerMount] = (),
    ) -> tuple[SandboxMeta, bool]:
        """The sandbox named `name`, created (running) if absent. True when created now.

        Refused (IsolationUnavailable) when this machine cannot give it `isolation`, or
        (InvalidRequest) when a bind names no host path (see isolation)."""
        folder = self.folder(name)
        self.sandboxes_dir.mkdir(parents=True, exist_ok=True)
        with flock(self.sandboxes_dir / ".create.lock"):
            existing = self.find(name)
            if existing is not None:
                return existing, False
            local_isolation.require(isolation, network)
            isolated = isolation == "bubblewrap"
            # Behind the gateway: no route out but its port (the names in `egress`).
            gated = isolated and network == "own" and egress is not None
            run = (labels or {}).get(LABEL_RUN, name)
            uid = local_isolation.sandbox_uid(run) if isolated else None
            gateway_port = gateway_service.live_port(self.home) if gated else None
            served = gateway_port is not None and origin is not None
            if origin_bind is not None and not served:
                # Cloned from the folder itself: the sandbox must see it (and may read it).
                binds = (*binds, origin_bind)
            local_isolation.check_binds(binds, uid)
            disk = disk_limit.plan(disk_mib, self.home)
            disk_limit.require_room(self.home)
            # A writable one is the run's store, inside the same limit (run_store).
            shown = worker_mounts.prepare(mounts, uid, disk, self.trash_dir) if isolated else []
            if disk.mode == "image" and disk.mib is not None:
                folder.mkdir(parents=True, exist_ok=True)
                own_mib = run_store.own_image_mib(disk.mib, shown)
                disk_image.attach(folder, own_mib)  # workspace, home and tmp on its image
            (folder / "processes").mkdir(parents=True, exist_ok=True)
            # The folders the sandbox's user writes in are given to it by descriptor, like
            # every later write into them (no agent runs yet, but the rule has no exception).
            for sub in ("workspace", "home", "tmp"):
                os.close(open_dir(folder, [sub], create=True, owner=uid))
            if uid is not None:
                gitconfig = local_isolation.SANDBOX_GITCONFIG.encode()
                write_inside(folder, ["home", ".gitconfig"], gitconfig, mode=0o644, owner=uid)
            # Beside those folders, the worker's own: shown read-only at /etc/resolv.conf.
            (folder / RESOLV_CONF).write_text(netns.RESOLV_CONF_TEXT)
            held = self._plan_cgroups(name, vcpu, memory_mib)
            now = time.time()
            meta = SandboxMeta(
                id=name,
                name=name,
                labels=dict(labels or {}),
                state="running",
                created_at=now,
                timeout_seconds=timeout_seconds,
                deadline=None if timeout_seconds is None else now + timeout_seconds,
                vcpu=vcpu,
                memory_mib=memory_mib,
                on_lease_end=on_lease_end,
                lease_seconds=timeout_seconds,
                isolation=isolation,
                limits=local_limits.choose(held.limited, own_cgroup=held.cgroup is not None),
                freezer=held.freezer,
                cgroup=held.cgroup,
                cgroups=held.joins,
                cgroup_limits=list(held.limited),
                systemd_slice=held.systemd_slice,
                no_cgroup=held.why,
                binds=[bind.model_dump() for bind in binds],
                network=("gateway" if gated else network) if isolated else "host",
                host_ports=list(host_ports),
                egress=list(egress) if gated and egress is not None else None,
                gateway_port=gateway_port,
                git_origin=dict(origin) if gated and origin is not None else None,
                model=dict(model) if gated and model is not None else None,
                uid=uid,
                disk=disk.mode,
                disk_mib=disk.mib,
                mounts=shown,
            )
            self._save(meta)
            return meta, True

    def _plan_cgroups(self, name: str, vcpu: int, memory_mib: int) -> local_cgroup_plan.Plan:
        """The new sandbox's own cgroup, made (none where the machine has none to give)."""
        processes = local_isolation.max_processes()
        try:
            return local_cgroup_plan.plan(
                name, self.home, vcpu=vcpu, memory_mib=memory_mib, processes=processes
            )
        except ValueError as error:  # the worker's setting names no kind
            raise invalid_request(str(error)) from None
        except OSError as error:
            raise ProviderError(f"cannot make the sandbox's cgroup: {error}") from None
