"""`overnight reap`'s part for the workspaces runs kept (`RunSpec.keep_workspace`): the refs
`refs/overnight/<run_id>/<n>` in the runs' repositories, and those their done checks were run
against (`refs/overnight/<run_id>/check-<n>`), deleted with the run's retention
(overnight.core.retention.ref_verdict).

The repositories are found from the runs Temporal knows: a run that pushed a ref set the memo
`overnight-workspace` (its repository without credentials, its `keep_failed_days`). Each
repository is listed once (`git ls-remote`), with the spec of one of its runs for its URL, and
every run's refs found there are judged, those of runs Temporal no longer knows too. A
repository no run Temporal knows names is not looked at (docs/operator.md: delete by hand).

A local origin is a person's folder (a bare repository or a `git init` with a work tree), and
a root worker is not its owner: git refuses such a repository (dubious ownership), so its refs
were never deleted. Its git runs as the folder's owner (as the gateway's http-backend does:
nothing it writes there, a rewritten `packed-refs`, becomes root's), trusting the folder
(`safe.directory`, also read by the upload-pack and receive-pack it starts), with no gc there.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from temporalio.client import Client

from activities.sandbox_base.setup import clone_source
from overnight.core.errors import OvernightError
from overnight.core.grants import local_repo_path
from overnight.core.retention import RunEnd, ref_verdict
from overnight.core.safe_git import no_prompt, run_git
from overnight.core.specs import redact_url, scrub_url
from overnight.core.workspace_spec import MEMO_KEY, REF_ROOT, owner_of_ref
from overnight.worker.run_history import run_spec

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
            refs = await asyncio.to_thread(kept_refs, url)
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
            await asyncio.to_thread(delete_refs, url, [ref for ref, _, _ in doomed])
        except OvernightError as err:
            failed = str(err)
        reaped += [RefReaped(name, ref, run, why, not failed, failed) for ref, run, why in doomed]
    return reaped


def kept_refs(url: str) -> list[str]:
    """Every ref under `refs/overnight/` in the repository at `url`."""
    out = _git(url, "ls-remote", "--refs", "--", url, f"{REF_ROOT}/*")
    return [line.split("\t", 1)[1] for line in out.splitlines() if "\t" in line]


def delete_refs(url: str, refs: list[str]) -> None:
    _git(url, "push", "--quiet", "--no-verify", "--delete", "--", url, *refs)


# What git reads as its only configuration for a local origin: the folder trusted whoever owns
# it, no hook, no gc of the person's repository after a delete (read by the upload-pack or
# receive-pack git starts there too: a `-c` would not reach them).
LOCAL_CONFIG = (
    "[safe]\n\tdirectory = *\n[core]\n\thooksPath = /dev/null\n"
    "[receive]\n\tautogc = false\n[gc]\n\tauto = 0\n"
)


@dataclass(frozen=True)
class Owner:
    uid: int
    gid: int


def owner_to_run_as(euid: int, folder_uid: int, folder_gid: int) -> Owner | None:
    """Whom a local origin's git runs as: its folder's owner when the worker is root and
    the folder is not root's (None: the worker itself)."""
    return Owner(folder_uid, folder_gid) if euid == 0 and folder_uid != 0 else None


def local_environment(home: str, config: str) -> dict[str, str]:
    """A local origin's git environment: the worker's PATH and locale, `config` as its only
    configuration (none of root's, which its owner could not read anyway)."""
    kept = {name: os.environ[name] for name in ("PATH", "LANG", "LC_ALL") if name in os.environ}
    return {
        "PATH": os.defpath,
        **kept,
        "HOME": home,
        "XDG_CONFIG_HOME": home,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": config,
        "GIT_TERMINAL_PROMPT": "0",
    }


def _git(url: str, *args: str) -> str:
    local = local_repo_path(url)
    with tempfile.TemporaryDirectory(prefix="overnight-reap-") as where:
        env = no_prompt()
        owner = None
        if local is not None:
            config = os.path.join(where, "gitconfig")
            with open(config, "w") as handle:
                handle.write(LOCAL_CONFIG)
            env = local_environment(where, config)
            owner = _owner(local)
            if owner is not None:  # its git works in this folder too
                for path in (where, config):
                    os.chown(path, owner.uid, owner.gid)
        run_as = None if owner is None else (owner.uid, owner.gid)
        bare = os.path.join(where, "repo.git")
        run_git(
            "init", "--quiet", "--bare", bare, cwd=None, timeout=GIT_SECONDS, env=env, run_as=run_as
        )
        done = run_git(*args, cwd=bare, timeout=GIT_SECONDS, env=env, run_as=run_as, text=True)
    if done.returncode != 0:
        why = scrub_url(git_failure(done.stderr), url)
        raise OvernightError(f"git {args[0]} of {redact_url(url)} failed: {why}")
    return done.stdout


def git_failure(stderr: str, limit: int = 300) -> str:
    """What git said of its failure, in at most `limit` characters: its first `fatal:` or
    `error:` line (the cause: "detected dubious ownership ..." is followed by a long hint),
    else the end of what it printed."""
    lines = stderr.strip().splitlines()
    cause = next((line for line in lines if line.startswith(("fatal:", "error:"))), None)
    if cause is None:
        return stderr.strip()[-limit:]
    return cause[:limit]


def _owner(folder: str) -> Owner | None:
    try:
        found = os.stat(folder)
    except OSError:
        return None  # git says what is wrong with it
    return owner_to_run_as(os.geteuid(), found.st_uid, found.st_gid)
