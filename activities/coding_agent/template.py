"""A coding agent's CLI on Runtime: a **template snapshot** made once, that every sandbox of
every run with that CLI starts from (`snapshot` at create), so no attempt uploads the CLI.

Runtime has no mounts, and each CLI is about 400 MB, so it is put in the sandbox at create
the cheapest way Runtime's API offers (its reference, version 0.2.0):

- A **disk snapshot** (`POST /v1/sandboxes/{id}:snapshot {"mode": "disk"}`) of a sandbox that
  holds the CLI, made once per CLI version and sandbox size and reused: a create with
  `snapshot` starts as a copy of it. An attempt then sends no byte of the CLI.
- Made by uploading the worker's own install (the very bytes `overnight agents` checked), not
  by `npm install` in the sandbox: that would need the npm registry reachable from the
  sandbox at every rebuild, and could fetch other bytes than the pinned ones the worker ran.
  The native binary and its package files go to `/workspace/.overnight/agents/<kind>-<ver>/`
  (Runtime writes large files only under `/workspace`) through the chunked upload
  (`POST …/uploads`, 1 MiB parts in parallel, SHA-256 checked at commit).
- The cache: the snapshot carries the label `overnight-cli-template: <key>` (kind, version,
  cpu, and the sandbox size, since a snapshot keeps its source's size); this worker remembers
  the id, and any worker finds it by its label. When it is gone (deleted, its retention over),
  the next create makes it again: one upload, then the cache holds again.
- The template sandbox lives only while it is made: its lease ends by stopping
  (`onLeaseEnd: "stop"`), so one a dead worker left costs at most that lease, and it is
  stopped as soon as its snapshot is ready.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from temporalio import activity

from activities.providers.protocol import ProviderError, SandboxProvider, SandboxRequest
from activities.providers.snapshot_protocol import SnapshotInfo, SnapshotProvider
from overnight.core.agent_kinds import AgentCli, agent_cli, npm_cpu
from overnight.core.coding_agents import install_folder, sandbox_executable, sandbox_folder
from overnight.core.models import RunSpec
from overnight.core.provider_traits import traits

LABEL_TEMPLATE = "overnight-cli-template"
# Kept this long; a create after that makes it again (one upload).
RETENTION_DAYS = 30
# The template sandbox's lease: long enough for the upload, short enough that one left
# behind by a dead worker costs little.
TEMPLATE_LEASE_SECONDS = 1800
VERSION_TIMEOUT_SECONDS = 60
# Another worker is making the same template: wait for its snapshot this long.
WAIT_FOR_OTHER_SECONDS = 600
WAIT_STEP_SECONDS = 2.0


def template_key(cli: AgentCli, cpu: str, spec: RunSpec) -> str:
    """What the template depends on: the CLI, the sandbox's cpu, and its size."""
    disk = spec.disk_mib if spec.disk_mib is not None else "default"
    return f"{cli.folder_name}-{cpu}-{spec.vcpu}cpu-{spec.memory_mib}m-{disk}d"


def template_name(key: str) -> str:
    """The template sandbox's name: one per key in the account, so two workers share it."""
    return "overnight-cli-" + "".join(c if c.isalnum() else "-" for c in key.lower())


def carried_files(folder: Path) -> list[Path]:
    """The install's regular files, relative to it (npm's `.bin` links are not needed: the
    adapter runs the native binary by its path)."""
    found: list[Path] = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(root, d)))
        for name in sorted(names):
            path = Path(root) / name
            if path.is_file() and not path.is_symlink():
                found.append(path.relative_to(folder))
    return found


@dataclass(frozen=True)
class TemplateUse:
    """Which template a create used, and what making it cost (zero when it was cached)."""

    snapshot_id: str
    key: str
    built: bool
    uploaded_bytes: int = 0
    seconds: float = 0.0


class CliTemplates:
    """One worker's cache of template snapshots, by key; a lock per key so its creates make
    a missing one once."""

    def __init__(self, home: Path | None = None) -> None:
        self._home = home
        self._known: dict[str, str] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.uses: list[TemplateUse] = []  # for tests and the log

    async def snapshot_for(
        self, provider: SandboxProvider, spec: RunSpec, cli: AgentCli | None = None
    ) -> str:
        """The id of a ready template snapshot for the spec's CLI (`cli`, looked up by the
        create; not given, looked up here), made first if missing."""
        assert spec.agent is not None
        if not isinstance(provider, SnapshotProvider):
            raise ProviderError(f"provider {spec.provider} has no snapshots", retryable=False)
        snapshots: SnapshotProvider = provider
        cli = cli if cli is not None else agent_cli(spec.agent.kind)
        key = template_key(cli, npm_cpu(traits(spec.provider).machine), spec)
        known = self._known.get(key)
        if known is not None and (await snapshots.snapshot_info(known)).state == "ready":
            return self._used(TemplateUse(known, key, built=False))
        async with self._locks.setdefault(key, asyncio.Lock()):
            found = await _ready_template(snapshots, key)
            if found is None:
                use = await self._build(provider, snapshots, spec, cli, key)
            else:
                use = TemplateUse(found.snapshot_id, key, built=False)
            self._known[key] = use.snapshot_id
            return self._used(use)

    def _used(self, use: TemplateUse) -> str:
        self.uses.append(use)
        if use.built:
            _log(
                f"made the CLI template {use.key} ({use.snapshot_id}): "
                f"{use.uploaded_bytes} bytes uploaded in {use.seconds:.1f} s"
            )
        return use.snapshot_id

    async def _build(
        self,
        provider: SandboxProvider,
        snapshots: SnapshotProvider,
        spec: RunSpec,
        cli: AgentCli,
        key: str,
    ) -> TemplateUse:
        began = time.monotonic()
        request = SandboxRequest(
            name=template_name(key),
            labels={LABEL_TEMPLATE: key},
            timeout_seconds=TEMPLATE_LEASE_SECONDS,
            vcpu=spec.vcpu,
            memory_mib=spec.memory_mib,
            disk_mib=spec.disk_mib,
            on_lease_end="stop",
        )
        sandbox, created = await provider.get_or_create(request)
        if not created or sandbox.state != "running":
            # Another worker's (or an earlier try's) template: wait for its snapshot.
            found = await _wait_for_template(snapshots, key)
            if found is not None:
                return TemplateUse(found.snapshot_id, key, built=False)
            await provider.stop(sandbox.sandbox_id)
            raise ProviderError(f"the CLI template {key} was not made in time; trying again")
        sid = sandbox.sandbox_id
        try:
            sent = await _upload_install(provider, sid, cli, spec.provider, self._home)
            await _check_version(provider, sid, cli, spec.provider)
            await provider.pause(sid)
            snap = await snapshots.snapshot(
                sid,
                name=key,
                mode="disk",
                labels={LABEL_TEMPLATE: key},
                retention_days=RETENTION_DAYS,
            )
        finally:
            await provider.stop(sid)
        if snap.state != "ready":
            raise ProviderError(f"the CLI template {key} could not be captured: {snap.error}")
        return TemplateUse(snap.snapshot_id, key, True, sent, time.monotonic() - began)


async def _ready_template(snapshots: SnapshotProvider, key: str) -> SnapshotInfo | None:
    ready = [s for s in await snapshots.list_snapshots({LABEL_TEMPLATE: key}) if s.state == "ready"]
    # The newest: two workers that made it at once made two, and either does.
    ready.sort(key=lambda s: (s.created_at is not None, s.created_at), reverse=True)
    return ready[0] if ready else None


async def _wait_for_template(snapshots: SnapshotProvider, key: str) -> SnapshotInfo | None:
    deadline = time.monotonic() + WAIT_FOR_OTHER_SECONDS
    while time.monotonic() < deadline:
        found = await _ready_template(snapshots, key)
        if found is not None:
            return found
        await asyncio.sleep(WAIT_STEP_SECONDS)
    return None


async def _upload_install(
    provider: SandboxProvider, sandbox_id: str, cli: AgentCli, kind: str, home: Path | None
) -> int:
    """Every file of the worker's install into the template of a `kind` provider's
    sandboxes; the bytes sent."""
    source = install_folder(cli, home).resolve()
    target = sandbox_folder(cli, kind)
    sent = 0
    runnable: list[str] = []
    for relative in await asyncio.to_thread(carried_files, source):
        local = source / relative
        data = await asyncio.to_thread(local.read_bytes)
        remote = f"{target}/{relative.as_posix()}"
        await provider.write_file(sandbox_id, remote, data)
        sent += len(data)
        if os.stat(local).st_mode & 0o111:
            runnable.append(remote)
    if runnable:
        done = await provider.run(sandbox_id, "chmod 755 " + " ".join(map(shlex.quote, runnable)))
        if done.exit_code != 0:
            raise ProviderError(f"chmod in the CLI template failed: {done.stderr[-300:]}")
    return sent


async def _check_version(
    provider: SandboxProvider, sandbox_id: str, cli: AgentCli, kind: str
) -> None:
    """The uploaded binary runs in the provider's sandbox and is the pinned version."""
    executable = sandbox_executable(cli, traits(kind).machine, kind)
    env = " ".join(
        f"{name}={shlex.quote(value)}"
        for name, value in cli.run_environment(sandbox_folder(cli, kind)).items()
    )
    done = await provider.run(
        sandbox_id,
        f"env {env} {shlex.quote(executable)} --version",
        cwd="/workspace",
        timeout_seconds=VERSION_TIMEOUT_SECONDS,
    )
    if done.exit_code != 0 or done.stdout.strip() != cli.version_line:
        said = f"exit {done.exit_code}: " + (done.stdout.strip() or done.stderr.strip())[-300:]
        raise ProviderError(
            f"{cli.kind} in the CLI template does not run as {cli.version_line!r}: {said}",
            retryable=False,
        )


def _log(message: str) -> None:
    if activity.in_activity():
        activity.logger.info(message)
