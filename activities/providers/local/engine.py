"""The local sandbox engine: sandboxes as folders, agents as real detached processes.

Layout under `home` (`$OVERNIGHT_HOME`, default `~/.overnight`)::

    sandboxes/<name>/sandbox.json       state (JSON, written atomically)
    sandboxes/<name>/.lock              flock held while the state or the processes change
    sandboxes/<name>/workspace/         what the sandbox sees as /workspace
    sandboxes/<name>/home/              $HOME of its commands and agents
    sandboxes/<name>/tmp/               its /tmp and /var/tmp, when isolated
    sandboxes/<name>/processes/<id>/    one agent each (see procs)
    trash/                              what stops are deleting (see disk)

A stop frees the folder but for a tombstone (its state, and each agent's records and output
tail), crash-safely (see disk): a stopped sandbox is gone, as on Runtime; a paused one keeps
everything.

Commands and agents run isolated with bubblewrap unless the sandbox was made with
`isolation="none"` (see isolation), limited as limits can.

Everything is in files, so any worker process (or the Runtime API fake) can pick up where
another left off. The engine is synchronous and thread-safe; callers on an event loop use
`asyncio.to_thread`. The time limit (the lease) is enforced twice: each agent's launcher acts
at the deadline, and so does every engine access to an expired sandbox. Like Runtime, the
lease end pauses the sandbox (`on_lease_end="pause"`: its cgroup frozen, files kept; see cgroups)
or stops it (`"stop"`: agents killed, `stop_reason` "lease_expired"); `wake` carries a paused
sandbox on with a fresh lease.

Failures are `ProviderError`s: `SandboxNotFound`, `SandboxNotRunning`, or kind
`InvalidRequest` (non-retryable) for a bad name, key, path or folder.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from activities.gateway import service as gateway_service
from activities.providers.local import cgroup_plan as local_cgroup_plan
from activities.providers.local import cgroups as local_cgroups
from activities.providers.local import disk as local_disk
from activities.providers.local import (
    disk_image,
    disk_limit,
    netns,
    run_store,
    worker_mounts,
)
from activities.providers.local import isolation as local_isolation
from activities.providers.local import limits as local_limits
from activities.providers.local import procs as local_procs
from activities.providers.local.files import (
    WorkspaceMap,
    open_dir,
    read_json,
    write_inside,
    write_json,
)
from activities.providers.local.guest_files import GuestFiles
from activities.providers.local.kept import KeptSandboxes, end_launchers
from activities.providers.local.mounts import RESOLV_CONF, SANDBOX_HOME
from activities.providers.local.procs import ProcessRecord
from activities.providers.local.state import (
    LEASE_EXPIRED,
    NAME_PATTERN,
    PROCESS_ID_PATTERN,
    SANDBOX_FILE,
    LeaseEnd,
    SandboxMeta,
    default_home,
    flock,
    invalid_request,
    process_id_for,
)
from activities.providers.protocol import (
    CommandOutput,
    ProviderError,
    SandboxNotFound,
    SandboxNotRunning,
    WorkerMount,
)
from overnight.constants import LABEL_RUN
from overnight.isolation import HostBind, Isolation

# Like Runtime: `extend` moves the end at most this far ahead of now.
MAX_AHEAD_SECONDS = 24 * 3600
# Variables of the worker that commands and agents inherit; anything else must be asked for.
PASSED_THROUGH_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
# A pause without a cgroup ends the agents: how long their launchers may take to record it.
PAUSE_KILL_SECONDS = 5.0


class LocalEngine(GuestFiles, KeptSandboxes):
    """Local sandboxes under `home`. Sandbox ids are their names.

    Sandboxes: `get_or_create`, `find` (None if absent), `get`, `list_sandboxes`, `pause`,
    `wake`, `stop` (frees its disk), `extend`, `set_labels`. Agents: `start_process`
    (idempotent by start key), `process`.
    Guest: `run`, `read_file` (capped), `write_file` (atomic), `upload_dir`, `host_path`.
    """

    def __init__(self, home: Path | str | None = None):
        self.home = Path(home).expanduser() if home is not None else default_home()
        self.sandboxes_dir = self.home / "sandboxes"
        self.trash_dir = self.home / local_disk.TRASH
        # Sandboxes that had let go of their image and that this engine mounted again for a
        # read (`let_go_again` unmounts them: a CLI's provider does at its close).
        self.mounted_again: set[str] = set()

    # ----- sandboxes -----

    def folder(self, sandbox_id: str) -> Path:
        if not NAME_PATTERN.match(sandbox_id):
            raise invalid_request(f"{sandbox_id!r} is not a valid sandbox name")
        return self.sandboxes_dir / sandbox_id

    def workspace(self, sandbox_id: str) -> WorkspaceMap:
        """The sandbox's /workspace on the host, its image mounted (again) first."""
        self.ensure_disk(sandbox_id)
        return WorkspaceMap(self.folder(sandbox_id) / "workspace")

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

    def find(self, sandbox_id: str) -> SandboxMeta | None:
        """The sandbox's current state, or None if there is none (one whose lease ran out is
        paused or stopped first)."""
        meta = self._load(sandbox_id)
        if (
            meta is not None
            and meta.disk == "image"
            and meta.state != "stopped"
            and meta.released_at is None
        ):
            # Mounted again after a reboot, unless a stop came in between (one that let go of
            # its image on purpose is mounted by what needs its files: `ensure_disk`).
            disk_image.attached(self.folder(sandbox_id), lambda: self._kept(sandbox_id))
        if meta is None or not meta.expired(time.time()):
            return meta
        with self._changing(sandbox_id) as current:
            return current

    def get(self, sandbox_id: str) -> SandboxMeta:
        meta = self.find(sandbox_id)
        if meta is None:
            raise SandboxNotFound(sandbox_id)
        return meta

    def list_sandboxes(
        self, labels: Mapping[str, str] | None = None, *, include_stopped: bool = False
    ) -> list[SandboxMeta]:
        """Sandboxes carrying all of `labels`, oldest first."""
        found = []
        if self.sandboxes_dir.is_dir():
            for folder in self.sandboxes_dir.iterdir():
                if not NAME_PATTERN.match(folder.name):
                    continue
                meta = self.find(folder.name)
                if meta is None or (meta.state == "stopped" and not include_stopped):
                    continue
                if all(meta.labels.get(k) == v for k, v in (labels or {}).items()):
                    found.append(meta)
        return sorted(found, key=lambda m: (m.created_at, m.id))

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

    # ----- agents -----

    def start_process(
        self,
        sandbox_id: str,
        start_key: str,
        command: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> tuple[ProcessRecord, bool]:
        """Start `command` once per `start_key`; a repeated key returns the first process.

        True when started now. The process runs `bash -c` in its own session and outlives the
        calling process; `env` (mapped like commands) is added to the sandbox's base env.
        """
        process_id = process_id_for(start_key)
        with self._changing(sandbox_id) as meta:
            proc_dir = self.folder(sandbox_id) / "processes" / process_id
            if proc_dir.exists():
                return local_procs.read_record(proc_dir), False
            if meta.state != "running":
                raise SandboxNotRunning(sandbox_id, meta.state)
            sandbox_cwd = cwd or "/workspace"
            self._real_dir(sandbox_id, sandbox_cwd)
            local_procs.launch(
                proc_dir,
                wrapped=self._wrap(meta, command, sandbox_cwd, env, agent=True),
                sandbox_file=self.folder(sandbox_id) / SANDBOX_FILE,
                sandbox_command=command,
                sandbox_cwd=sandbox_cwd,
            )
            return local_procs.read_record(proc_dir), True

    def process(self, sandbox_id: str, process_id: str) -> ProcessRecord | None:
        """An agent's state and exit code, or None if the sandbox has no such process."""
        self.get(sandbox_id)  # enforces the deadline first
        proc_dir = self.folder(sandbox_id) / "processes" / process_id
        if not PROCESS_ID_PATTERN.match(process_id) or not proc_dir.is_dir():
            return None
        return local_procs.read_record(proc_dir)

    # ----- commands and files -----

    def run(
        self,
        sandbox_id: str,
        command: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_seconds: float = 600,
    ) -> CommandOutput:
        """Run `bash -c command` to completion (killed at the timeout or the deadline)."""
        meta = self.get(sandbox_id)
        if meta.state != "running":
            raise SandboxNotRunning(sandbox_id, meta.state)
        if meta.deadline is not None:
            timeout_seconds = min(timeout_seconds, meta.deadline - time.time())
        self._real_dir(sandbox_id, cwd or "/workspace")
        return local_procs.run_command(
            self._wrap(meta, command, cwd or "/workspace", env, agent=False),
            timeout_seconds=timeout_seconds,
        )

    # ----- internals -----

    def _load(self, sandbox_id: str) -> SandboxMeta | None:
        value = read_json(self.folder(sandbox_id) / SANDBOX_FILE)
        return None if value is None else SandboxMeta.from_json(value)

    def _kept(self, sandbox_id: str) -> bool:
        meta = self._load(sandbox_id)
        return meta is not None and meta.state != "stopped"

    def _save(self, meta: SandboxMeta) -> SandboxMeta:
        write_json(self.folder(meta.id) / SANDBOX_FILE, dataclasses.asdict(meta))
        return meta

    @contextmanager
    def _changing(self, sandbox_id: str) -> Iterator[SandboxMeta]:
        """Hold the sandbox's lock and yield its state, stopping it first if it expired."""
        folder = self.folder(sandbox_id)
        if not (folder / SANDBOX_FILE).exists():
            raise SandboxNotFound(sandbox_id)
        with flock(folder / ".lock"):
            meta = self._load(sandbox_id)
            if meta is None:
                raise SandboxNotFound(sandbox_id)
            if meta.expired(time.time()):
                meta = self._lease_end_locked(meta)
            yield meta

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

    def _procs(self, sandbox_id: str) -> Path:
        return self.folder(sandbox_id) / "processes"

    def _wrap(
        self,
        meta: SandboxMeta,
        command: str,
        cwd: str,
        extra: Mapping[str, str] | None,
        *,
        agent: bool,
    ) -> local_isolation.Wrapped:
        """`command` ready to run in the sandbox, isolated as it was created."""
        env = {name: os.environ[name] for name in PASSED_THROUGH_ENV if name in os.environ}
        env.setdefault("PATH", os.defpath)
        isolated = meta.isolation == "bubblewrap"
        env["HOME"] = SANDBOX_HOME if isolated else str(self.folder(meta.id) / "home")
        mapped = meta.isolation == "none"  # isolated, /workspace is real: nothing to rewrite
        env.update(self.workspace(meta.id).map_env(dict(extra or {})) if mapped else extra or {})
        if meta.network == "gateway" and meta.gateway_port is not None:
            env.update(gateway_service.sandbox_env(self.home, meta.id, meta.gateway_port))
        folder = self.folder(meta.id)
        self.ensure_disk(meta.id)
        if meta.cgroups:
            try:
                local_cgroup_plan.ensure(meta.freezer, meta.cgroups, meta.systemd_slice)
            except OSError as error:
                raise ProviderError(f"cannot make the sandbox's cgroup: {error}") from None
        if meta.mounts:  # its run's store mounted again after a reboot, or left out
            meta = dataclasses.replace(meta, mounts=run_store.ready(meta.mounts))
        return local_isolation.wrap(folder, self.home, meta, command, cwd, env, agent=agent)
