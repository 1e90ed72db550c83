"""`overnight reap`'s part for the workspaces runs kept (`RunSpec.keep_workspace`): the refs
`refs/overnight/<run_id>/<n>` in the runs' repositories, and those their done checks were run
against (`refs/overnight/<run_id>/check-<n>`), deleted with the run's retention
(overnight.retention.ref_verdict).

The repositories are found from the runs Temporal knows: a run that pushed a ref set the memo
`overnight-workspace` (its repository without credentials, its `keep_failed_days`). Each
repository is listed once (`git ls-remote`), with the spec of one of its runs for its URL, and
every run's refs found there are judged, those of runs Temporal no longer knows too. A
repository no run Temporal knows names is not looked at (docs/operator.md: delete by hand).
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from temporalio.client import Client

from activities.sandbox_setup import clone_source
from overnight.errors import OvernightError
from overnight.retention import RunEnd, ref_verdict
from overnight.specs import redact_url, scrub_url
from overnight.worker.run_history import run_spec
from overnight.workspace_spec import MEMO_KEY, REF_ROOT, owner_of_ref

logger = logging.getLogger(__name__)
GIT_SECONDS = 300
# The runs a reap reads at most (newest first), to find the repositories.
MAX_RUNS_LISTED = 10_000


@dataclass(frozen=True)
class RefReaped:
    repo: str  # without credentials
    ref: str
    run_id: str
    why: str
    deleted: bool
    detail: str = ""


async def repositories(client: Client) -> dict[str, tuple[str, dict[str, int | None]]]:
    """By repository (without credentials): its URL from one run's spec, and by run id the
    `keep_failed_days` of each run that pushed refs there."""
    found: dict[str, tuple[str, dict[str, int | None]]] = {}
    async for listed in client.list_workflows("WorkflowType = 'AgentRun'", limit=MAX_RUNS_LISTED):
        try:
            memo: Mapping[str, Any] = await listed.memo()
        except Exception:  # a memo this client cannot decode is not overnight's
            continue
        kept = memo.get(MEMO_KEY)
        if not isinstance(kept, dict) or not isinstance(kept.get("repo"), str):
            continue
        name, days = kept["repo"], kept.get("keep_failed_days")
        if name not in found:
            try:
                url = clone_source((await run_spec(client, listed.id)).repo)
            except OvernightError:
                continue
            found[name] = (url, {})
        found[name][1][listed.id] = days if isinstance(days, int) else None
    return found


async def reap_refs(
    client: Client,
    end_of: Callable[[str], Awaitable[RunEnd]],
    *,
    now: datetime,
    include_paused: bool = False,
) -> list[RefReaped]:
    """Delete the refs whose retention passed, one entry each (a repository that cannot be
    listed is logged and left for the next reap). `end_of`: what Temporal says of a run (the
    reap's `RunBook.end`)."""
    reaped: list[RefReaped] = []
    for name, (url, days) in (await repositories(client)).items():
        try:
            refs = await asyncio.to_thread(_listed, url)
        except OvernightError as err:
            # Not an entry: a repository gone for good would fail every reap, for ever.
            logger.warning("kept workspaces' refs in %s not looked at: %s", name, err)
            continue
        doomed: list[tuple[str, str, str]] = []
        for ref in refs:
            owner = owner_of_ref(ref)
            if owner is None:
                continue
            judged = ref_verdict(
                await end_of(owner), days.get(owner), now=now, include_paused=include_paused
            )
            if judged.delete:
                doomed.append((ref, owner, judged.why))
        if not doomed:
            continue
        failed = ""
        try:
            await asyncio.to_thread(_deleted, url, [ref for ref, _, _ in doomed])
        except OvernightError as err:
            failed = str(err)
        reaped += [RefReaped(name, ref, run, why, not failed, failed) for ref, run, why in doomed]
    return reaped


def _listed(url: str) -> list[str]:
    out = _git(url, "ls-remote", "--refs", "--", url, f"{REF_ROOT}/*")
    return [line.split("\t", 1)[1] for line in out.splitlines() if "\t" in line]


def _deleted(url: str, refs: list[str]) -> None:
    _git(url, "push", "--quiet", "--no-verify", "--delete", "--", url, *refs)


def _git(url: str, *args: str) -> str:
    with tempfile.TemporaryDirectory(prefix="overnight-reap-") as where:
        subprocess.run(["git", "init", "--quiet", "--bare", where], capture_output=True)
        done = subprocess.run(
            ["git", "-c", "core.hooksPath=/dev/null", "-c", "protocol.ext.allow=never", *args],
            cwd=where,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=GIT_SECONDS,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    if done.returncode != 0:
        why = scrub_url(done.stderr.strip()[-300:], url)
        raise OvernightError(f"git {args[0]} of {redact_url(url)} failed: {why}")
    return done.stdout
