"""`overnight reap` (and the worker's hourly schedule of it, overnight.worker.reap_schedule):
delete what no run needs any more, and say how much disk it freed.

- Sandboxes (overnight.core.retention.verdict is the whole rule): those past their keep-until label,
  those still running of a run that is closed (a terminated workflow cannot clean up after
  itself), those paused of a run that could not clean up, once the retention its spec asked
  has passed since it closed; `--paused`: every paused sandbox of a closed run. Deleting is
  stopping: a stopped sandbox is gone, on Runtime as locally (its disk freed).
- Local deletes a killed process left half done: trash entries, and stopped sandboxes whose
  disk is still there (stops cut short, or made before stops freed it); and the records
  (tombstones) of local sandboxes deleted over `RECORD_DAYS` ago.
- Snapshots of runs that are gone or ended without cleaning up (terminated, failed, timed out);
  those of a run that ended well only with `--paused`.
- The refs of the workspaces runs kept (`refs/overnight/<run_id>/<n>`), once the run has been
  closed its `keep_failed_days` (overnight.worker.workspace_reaping); `--paused`: at once.
- The session stores of coding agents' runs that are closed or gone (the copies of a CLI's
  session the adapter keeps on this machine, `$OVERNIGHT_HOME/sessions/<run_id>/`, an image
  of its own or a folder: activities/providers/local/run_store.py), which a run that ended
  through its own end freed already: those of runs terminated, or ended before it did.
- The gateway's books on this host (overnight.worker.gateway_reaping): a run's model ledger
  and stats once the run is closed or gone, a sandbox's refused connections once it no
  longer runs nor waits paused.

- Local sandboxes kept paused after their run closed (labelled keep-until, or of a closed
  run) that still hold something on this host (a frozen agent's launcher and helpers, a
  mounted image): they let go of it (`let go`: agents ended, files kept, mounted again when
  read). A paused sandbox of an open run is its run's: its agent may be woken.

Without a Temporal server (`reap_here`), only what this host's files say is acted on: deletes
to finish, local sandboxes labelled keep-until (deleted past it, let go of before it). What
needs the server to judge (closed runs' unlabelled sandboxes, snapshots, session stores,
kept workspaces' refs, Runtime's sandboxes) waits for a reap with it.

The moment retention is judged at is `now` (a test lets time pass by giving a later one).
What Temporal says of each run is asked once (overnight.worker.run_book); each thing taken is
one entry (overnight.worker.reap_entries).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus

from activities.coding_agent.setup import SESSIONS_FOLDER
from activities.models import SandboxInfo
from activities.providers.disk import RECORD_DAYS, HostHeld, ProviderDisk
from activities.providers.local import run_store
from activities.providers.local.disk import TRASH
from activities.providers.protocol import SandboxProvider
from activities.providers.registry import disk_for, supports_snapshots
from overnight.core.constants import LABEL_KEEP_UNTIL, LABEL_RUN
from overnight.core.home import overnight_home
from overnight.core.provider_traits import traits
from overnight.core.retention import RunEnd, verdict
from overnight.worker.gateway_reaping import reap_gateway_books
from overnight.worker.reap_entries import ReapedSandbox
from overnight.worker.run_book import CLEAN_ENDINGS, RunBook
from overnight.worker.workspace_reaping import reap_refs


async def reap(
    client: Client,
    providers: Mapping[str, SandboxProvider],
    *,
    include_paused: bool = False,
    now: datetime | None = None,
) -> list[ReapedSandbox]:
    """Delete what no run needs any more (see the module's docstring); one entry each."""
    when = now or datetime.now(UTC)
    runs = RunBook(client)
    reaped: list[ReapedSandbox] = []
    for name, provider in providers.items():
        disk = disk_for(provider)
        if disk is not None:
            reaped += await _finish_deletes(name, disk, when)
        for sandbox in await provider.list({}, include_stopped=False):
            run_id = sandbox.labels.get(LABEL_RUN)
            if run_id is None:
                continue
            end = await runs.end(run_id)
            judged = verdict(
                sandbox.state, sandbox.labels, end, now=when, include_paused=include_paused
            )
            if judged.delete:
                reaped.append(await _stop(name, provider, disk, sandbox, run_id, judged.why))
            elif disk is not None and sandbox.state == "paused" and not end.open:
                reaped += await _let_go(name, disk, sandbox, run_id, "its run is closed")
    reaped += await _reap_snapshots(runs, providers, include_paused=include_paused)
    reaped += await _reap_workspace_refs(runs, when, include_paused=include_paused)
    if any(traits(name).host_bound for name in providers):  # this host's stores and books
        reaped += await reap_sessions(runs)
        reaped += await reap_gateway_books_of(runs)
    return reaped


async def reap_here(
    providers: Mapping[str, SandboxProvider],
    *,
    include_paused: bool = False,
    now: datetime | None = None,
) -> list[ReapedSandbox]:
    """`overnight reap` with no Temporal server: what this host's own files decide (see the
    module's docstring). A sandbox labelled keep-until belongs to a run that ended (or moved
    away), so it is judged by its label alone; any other is left to a reap with the server."""
    when = now or datetime.now(UTC)
    reaped: list[ReapedSandbox] = []
    for name, provider in providers.items():
        disk = disk_for(provider)
        if disk is None:
            continue  # not on this host: the server's to judge
        reaped += await _finish_deletes(name, disk, when)
        for sandbox in await provider.list({}, include_stopped=False):
            run_id = sandbox.labels.get(LABEL_RUN)
            if run_id is None or sandbox.state != "paused" or not _labelled(sandbox):
                continue
            # Labelled: its run ended; the label alone says how long it is kept.
            judged = verdict(
                sandbox.state, sandbox.labels, RunEnd(open=True), now=when, include_paused=False
            )
            if judged.delete or include_paused:
                why = judged.why if judged.delete else "its run is closed (reap --paused)"
                reaped.append(await _stop(name, provider, disk, sandbox, run_id, why))
            else:
                why = "kept after its run ended"
                reaped += await _let_go(name, disk, sandbox, run_id, why)
    return reaped


def _labelled(sandbox: SandboxInfo) -> bool:
    return sandbox.labels.get(LABEL_KEEP_UNTIL) is not None


def _sandbox_entry(
    provider_name: str, sandbox: SandboxInfo, run_id: str, why: str, kind: str = "sandbox"
) -> ReapedSandbox:
    """What the reap does to `sandbox` (stopped or let go of), not done yet."""
    return ReapedSandbox(
        provider=provider_name,
        sandbox_id=sandbox.sandbox_id,
        run_id=run_id,
        was=sandbox.state,
        stopped=False,
        kind=kind,
        why=why,
    )


async def _let_go(
    provider_name: str, disk: ProviderDisk, sandbox: SandboxInfo, run_id: str, why: str
) -> list[ReapedSandbox]:
    """A kept sandbox lets go of what it holds on this host; one entry when it held
    anything."""
    entry = _sandbox_entry(provider_name, sandbox, run_id, why, kind="released")
    try:
        held: HostHeld | None = await disk.let_go(sandbox.sandbox_id)
    except Exception as err:  # one stubborn sandbox must not keep the others
        entry.detail = f"{type(err).__name__}: {err}"
        return [entry]
    if held is None:
        return []
    entry.stopped = True
    entry.processes, entry.memory_bytes, entry.mounts = (
        held.processes,
        held.memory_bytes,
        held.mounts,
    )
    return [entry]


async def _reap_workspace_refs(
    runs: RunBook, now: datetime, *, include_paused: bool
) -> list[ReapedSandbox]:
    """The kept workspaces' refs whose retention passed (overnight.worker.workspace_reaping)."""
    found = await reap_refs(runs.client, runs.end, now=now, include_paused=include_paused)
    return [
        ReapedSandbox(
            provider=ref.repo,
            sandbox_id=ref.ref,
            run_id=ref.run_id,
            was="kept",
            stopped=ref.deleted,
            detail=ref.detail,
            kind="workspace",
            why=ref.why,
        )
        for ref in found
    ]


async def reap_gateway_books_of(runs: RunBook, home: Path | None = None) -> list[ReapedSandbox]:
    """The gateway's books no run needs any more (overnight.worker.gateway_reaping)."""
    return [
        ReapedSandbox(
            provider="local",
            sandbox_id=book.owner,
            run_id="",
            was="kept",
            stopped=True,
            kind=f"gateway {book.kind}",
            why=why,
            freed_bytes=book.freed_bytes,
        )
        for book, why in await reap_gateway_books(runs.status, home)
    ]


async def reap_sessions(runs: RunBook, home: Path | None = None) -> list[ReapedSandbox]:
    """Delete the session stores of runs that are closed or gone (no later sandbox of theirs
    resumes a session)."""
    home = home or overnight_home()
    root, trash = home / SESSIONS_FOLDER, home / TRASH
    if not root.is_dir():
        return []
    reaped: list[ReapedSandbox] = []
    for folder in sorted(root.iterdir()):
        if folder.is_symlink() or not folder.is_dir():
            continue
        status = await runs.status(folder.name)
        if status == WorkflowExecutionStatus.RUNNING:
            continue
        entry = ReapedSandbox(
            provider="local",
            sandbox_id=folder.name,
            run_id="",
            was="kept",
            stopped=False,
            kind="session",
            why="its run is gone" if status is None else "its run is closed",
        )
        try:
            entry.freed_bytes = await asyncio.to_thread(run_store.free, folder, trash)
            entry.stopped = True
        except OSError as err:  # one stubborn folder must not keep the others
            entry.detail = f"{type(err).__name__}: {err}"
        reaped.append(entry)
    return reaped


async def _finish_deletes(
    provider_name: str, disk: ProviderDisk, now: datetime
) -> list[ReapedSandbox]:
    return [
        ReapedSandbox(
            provider=provider_name,
            sandbox_id=done.what,
            run_id=done.run_id,
            was={"sandbox": "stopped", "records": "deleted"}.get(done.kind, "half deleted"),
            stopped=True,
            kind=done.kind,
            why=(
                f"their records are over {RECORD_DAYS} days old"
                if done.kind == "records"
                else "a delete cut short (a killed worker) finished"
            ),
            freed_bytes=done.freed_bytes,
        )
        for done in await disk.finish_deletes(now)
    ]


async def _stop(
    provider_name: str,
    provider: SandboxProvider,
    disk: ProviderDisk | None,
    sandbox: SandboxInfo,
    run_id: str,
    why: str,
) -> ReapedSandbox:
    entry = _sandbox_entry(provider_name, sandbox, run_id, why)
    try:
        await provider.stop(sandbox.sandbox_id)
    except Exception as err:  # one stubborn sandbox must not keep the others
        entry.detail = f"{type(err).__name__}: {err}"
        return entry
    entry.stopped = True
    if disk is not None:
        entry.freed_bytes = await disk.freed_bytes(sandbox.sandbox_id)
    return entry


async def _reap_snapshots(
    runs: RunBook, providers: Mapping[str, SandboxProvider], *, include_paused: bool
) -> list[ReapedSandbox]:
    """Delete snapshots of runs that no longer exist, or that ended without cleaning up
    (terminated, failed, timed out); those of a run that ended well only with `include_paused`."""
    reaped: list[ReapedSandbox] = []
    for provider_name, provider in providers.items():
        here = disk_for(provider) is not None  # its snapshots are on this machine's disk
        if not supports_snapshots(provider):
            continue
        for snap in await provider.list_snapshots({}):
            run_id = snap.labels.get(LABEL_RUN)
            if run_id is None:
                continue
            status = await runs.status(run_id)
            if status == WorkflowExecutionStatus.RUNNING:
                continue
            if status in CLEAN_ENDINGS and not include_paused:
                continue
            entry = ReapedSandbox(
                provider=provider_name,
                sandbox_id=snap.snapshot_id,
                run_id=run_id,
                was=snap.state,
                stopped=False,
                kind="snapshot",
                why="its run is gone" if status is None else "its run is closed",
                freed_bytes=snap.size_bytes if here else None,
            )
            try:
                await provider.delete_snapshot(snap.snapshot_id)
            except Exception as err:  # one stubborn snapshot must not keep the others
                entry.detail = f"{type(err).__name__}: {err}"
                entry.freed_bytes = None
            else:
                entry.stopped = True
            reaped.append(entry)
    return reaped
