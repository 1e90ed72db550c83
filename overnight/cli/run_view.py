"""What `overnight logs` and `overnight inspect` know of a run, found without a worker.

At 2 a.m. the worker may be the thing that is down, so everything here works without one:
the spec comes from the run's history (its start event), the sandboxes from the provider
(labelled with the run and the attempt), whether the run is still open from Temporal. The
`status` query, which needs a worker, only adds what it knows (restart reasons, the tails
kept in them) when it answers within a few seconds.

Sandboxes are read where they are. A paused Runtime sandbox wakes on any read, so `opened`
wakes one only when that cannot harm the run (an earlier attempt's, or any of a run that
waits for a person or has ended), says so on stderr, and pauses it again afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, timedelta

from temporalio.client import Client, WorkflowExecutionStatus

from activities.models import SandboxInfo
from activities.providers.forensics import SandboxForensics
from activities.providers.protocol import ProviderError, SandboxProvider
from activities.providers.registry import forensics_for
from overnight.cli.run_names import workflow_id_of
from overnight.core.constants import LABEL_ATTEMPT, LABEL_KEEP_UNTIL, LABEL_RUN
from overnight.core.errors import OvernightError
from overnight.core.host_settings import BadHostSetting, this_host
from overnight.core.models import RunSpec, RunStatus
from overnight.core.retention import parse_label
from overnight.worker.run_history import run_spec as run_spec

STATUS_TIMEOUT = timedelta(seconds=5)
# States in which the run's current sandbox is the supervisor's to wake or pause, not ours.
# A question's sandbox too: the answer wakes it, and a read's re-pause racing that wake would
# freeze an agent the run believes awake (a stall, then a restart).
_SUPERVISED = ("starting", "running", "restarting", "waiting_for_answer", "finishing")


class CannotRead(OvernightError):
    """A sandbox that cannot be read now (and why, in a sentence)."""


@dataclass
class RunView:
    run_id: str
    spec: RunSpec
    open: bool
    status: RunStatus | None
    sandboxes: dict[int, SandboxInfo] = field(default_factory=dict)

    @property
    def attempts(self) -> list[int]:
        return sorted(self.sandboxes)

    def latest(self) -> int | None:
        return max(self.sandboxes) if self.sandboxes else None

    def restart_reason(self, attempt: int) -> str | None:
        """Why `attempt` ended in a restart, when the status says."""
        if self.status is None:
            return None
        for record in self.status.restarts:
            if record.attempt == attempt:
                return record.reason
        return None

    def kept_tail(self, attempt: int) -> str | None:
        """The last words the run kept of `attempt` (its status), if any."""
        if self.status is None:
            return None
        words = self.status.last_words
        if words is not None and words.attempt == attempt:
            return words.tail
        for record in self.status.restarts:
            if record.attempt == attempt and record.output_tail:
                return record.output_tail
        return None

    def may_wake(self, sandbox: SandboxInfo) -> bool:
        """Whether waking this paused sandbox for a read cannot cost the run anything: it is
        not the one the supervisor is running (paused at its lease end, about to be woken)."""
        if not self.open:
            return True
        status = self.status
        if status is None:
            # Nobody to ask: only sandboxes older than the latest one are surely set aside.
            return sandbox.sandbox_id != self.sandboxes[max(self.sandboxes)].sandbox_id
        return not (status.state in _SUPERVISED and status.sandbox_id == sandbox.sandbox_id)


async def load_run(client: Client, name: str, provider_for: ProviderLookup) -> RunView:
    """The run `name` names (its workflow id or its run id: overnight/cli/run_names.py)."""
    run_id = await workflow_id_of(client, name)
    spec = await run_spec(client, run_id)
    handle = client.get_workflow_handle(run_id)
    described = await handle.describe()
    status = await query_status(client, run_id)
    view = RunView(
        run_id=run_id,
        spec=spec,
        open=described.status == WorkflowExecutionStatus.RUNNING,
        status=status,
    )
    await refresh_sandboxes(view, provider_for(spec.provider))
    return view


ProviderLookup = Callable[[str], SandboxProvider]


async def refresh_sandboxes(view: RunView, provider: SandboxProvider) -> None:
    found = await provider.list({LABEL_RUN: view.spec.run_id}, include_stopped=True)
    by_attempt: dict[int, SandboxInfo] = {}
    for info in found:
        attempt = info.labels.get(LABEL_ATTEMPT, "")
        if not attempt.isdigit():
            continue
        n = int(attempt)
        # A name given up by a stopped sandbox may be taken again: the newest holds it.
        older = by_attempt.get(n)
        if older is None or _created(info) >= _created(older):
            by_attempt[n] = info
    view.sandboxes = by_attempt


def _other_host(view: RunView, attempt: int) -> str | None:
    """The host holding `attempt`'s local sandbox, when the run knows it is not this one."""
    if view.status is None:
        return None
    host = view.status.sandbox_hosts.get(f"{view.spec.run_id}-{attempt}")
    try:
        here = this_host()
    except BadHostSetting:
        here = None
    return host if host is not None and host != here else None


def _created(info: SandboxInfo) -> float:
    return info.created_at.timestamp() if info.created_at is not None else 0.0


async def query_status(client: Client, run_id: str) -> RunStatus | None:
    """The run's status if a worker answers within a few seconds, else None."""
    try:
        status: RunStatus = await client.get_workflow_handle(run_id).query(
            "status", result_type=RunStatus, rpc_timeout=STATUS_TIMEOUT
        )
    except Exception:  # no worker answered (or none is running): go without
        return None
    return status


@dataclass
class Opened:
    """A sandbox open for reading: `woken` when it was woken for it (and will be re-paused)."""

    sandbox: SandboxInfo
    forensics: SandboxForensics
    woken: bool = False


@asynccontextmanager
async def opened(
    view: RunView,
    provider: SandboxProvider,
    attempt: int,
    say: Callable[[str], None],
) -> AsyncIterator[Opened]:
    """The sandbox of `attempt`, readable; woken (and paused again on the way out) when it is
    a paused Runtime sandbox that may be woken. CannotRead when it cannot be read now."""
    sandbox = view.sandboxes.get(attempt)
    if sandbox is None:
        elsewhere = _other_host(view, attempt)
        if elsewhere is not None:
            raise CannotRead(
                f"the sandbox of run {view.run_id}'s attempt {attempt} lives on host "
                f"{elsewhere}, not here ({this_host()}): run this command there"
            )
        if view.status is not None and 1 <= attempt <= view.status.attempt:
            raise CannotRead(
                f"the sandbox of run {view.run_id}'s attempt {attempt} is gone: deleted, and "
                "its record too"
            )
        have = ", ".join(map(str, view.attempts)) or "none yet"
        raise CannotRead(f"run {view.run_id} has no sandbox for attempt {attempt} (have: {have})")
    forensics = forensics_for(provider)
    if forensics is None:
        raise CannotRead(f"provider {view.spec.provider!r} cannot be read from here")
    current = await provider.sandbox(sandbox.sandbox_id)
    # A stopped sandbox is gone (a local one once its disk is freed: one stopped before stops
    # freed it is still read where it is).
    gone = current.deleted_at is not None or forensics.wakes_on_read
    if current.state == "missing" or (current.state == "stopped" and gone):
        raise CannotRead(deleted_text(sandbox, current, attempt))
    if not forensics.wakes_on_read:
        yield Opened(current, forensics)
        return
    if current.state != "paused":
        yield Opened(current, forensics)
        return
    if not view.may_wake(current):
        asking = view.status is not None and view.status.state == "waiting_for_answer"
        why = (
            "is paused for a question and the answer wakes it"
            if asking
            else "is paused at its lease end and the run is about to wake it"
            if view.status is not None
            else "is paused, and with no worker answering it cannot be told whether the run "
            "will wake it"
        )
        later = "try again once it is answered" if asking else "try again in a minute"
        raise CannotRead(
            f"sandbox {sandbox.sandbox_id} (attempt {attempt}) {why}: not woken for a read "
            f"(that could cost the run a restart); {later}"
        )
    say(
        f"sandbox {sandbox.sandbox_id} (attempt {attempt}) is paused: reading a paused Runtime "
        "sandbox wakes it, so it is woken for this read (a fresh lease, billed while awake) "
        "and paused again right after"
    )
    try:
        woken = await provider.wake(sandbox.sandbox_id)
    except ProviderError as error:
        raise CannotRead(f"could not wake sandbox {sandbox.sandbox_id}: {error}") from None
    try:
        yield Opened(woken, forensics, woken=True)
    finally:
        await asyncio.shield(pause_again(provider, sandbox.sandbox_id, say))


def deleted_text(listed: SandboxInfo, current: SandboxInfo, attempt: int) -> str:
    """Why a sandbox cannot be read any more, plainly: when it was deleted, and why then."""
    labels = current.labels or listed.labels
    until = parse_label(labels.get(LABEL_KEEP_UNTIL))
    when = current.deleted_at
    on = f" on {when.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if when is not None else ""
    kept = f"{until:%Y-%m-%d %H:%M} UTC" if until is not None else ""
    if until is not None and (when is None or when >= until):
        why = f"at the end of its retention (it was kept for a look until {kept})"
    elif until is not None:
        why = f"before its retention ended ({kept}): by a person, or overnight reap --paused"
    elif current.state == "missing":
        why = "and its record with it"
    else:
        why = "when it stopped (a stopped sandbox keeps nothing, as on Runtime)"
    return (
        f"sandbox {listed.sandbox_id} (attempt {attempt}) was deleted{on} {why}: its files and "
        "its full output are gone"
    )


async def pause_again(
    provider: SandboxProvider, sandbox_id: str, say: Callable[[str], None]
) -> None:
    """Pause a sandbox a read woke; a failure is said, with what to run, not raised."""
    try:
        await provider.pause(sandbox_id)
    except ProviderError as error:
        say(f"could not pause sandbox {sandbox_id} again: {error}; run: overnight reap --paused")
        return
    say(f"sandbox {sandbox_id} paused again")
