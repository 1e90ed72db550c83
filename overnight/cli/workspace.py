"""`overnight diff` and `overnight rewind`: what a run's agent changed, read from the workspace
kept at its checkpoints, and going on from one of them.

`diff` runs git here, on the user's machine: it fetches the kept ref from the run's repository
(the spec's `repo`, or `--repo` when this machine reaches it another way) into a temporary
bare repository and diffs it against where the run started, committed and uncommitted work
alike: the run's base (the commit its first sandbox cloned), else the kept commit's merge base
with the origin's default branch (a run begun before bases were kept), else nothing (an origin
with no commit then: every file is new). `--step N` diffs from the workspace kept at the
checkpoint before N instead, so it shows step N's work alone. The kept tree is the agent's and
may be hostile, so nothing of it is checked out and no hook, external diff or textconv runs.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable

from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.service import RPCError

from activities.sandbox_base.setup import clone_source
from overnight.cli.commands import Command
from overnight.cli.connecting import connect
from overnight.cli.run_names import RUN_NAME_HELP
from overnight.cli.terminal_output import raw_stdout, shown
from overnight.core.agent_text import one_line, terminal_line
from overnight.core.errors import OvernightError
from overnight.core.grants import local_repo_path
from overnight.core.models import RunStatus
from overnight.core.safe_git import git_command, no_prompt, run_git
from overnight.core.specs import redact_url, scrub_url
from overnight.core.workspace_spec import KeptWorkspace, find, kept_numbers, latest_pushed

Connect = Callable[[argparse.Namespace], Awaitable[Client]]
REWIND_UPDATE = "rewind"
FETCH_SECONDS = 600
# A local origin another user owns (a user's folder, read by root) is trusted by the
# upload-pack a fetch starts there too: it is not given git's own `-c` (overnight/core/safe_git.py).
# (Only there: over ssh it would be the server's command.)
_LOCAL_UPLOAD_PACK = "--upload-pack=git -c safe.directory=* upload-pack"


class WorkspaceRefused(OvernightError):
    bad_input = True


def _diff_arguments(diff: argparse.ArgumentParser) -> None:
    diff.add_argument("run_id", help=RUN_NAME_HELP)
    diff.add_argument(
        "--step",
        type=int,
        metavar="N",
        help="checkpoint N's work alone, from the checkpoint kept before it (default: the "
        "whole run's, to the latest); N: the n-th checkpoint the run kept, as overnight status "
        "lists them",
    )
    diff.add_argument("--repo", help="fetch from this URL or path (default: the spec's repo)")
    diff.add_argument("--stat", action="store_true", help="only which files, and how much")
    diff.add_argument(
        "--raw",
        action="store_true",
        help="git's bytes as they are, control characters and all, for a program (git apply) "
        "or a file: refused on a terminal",
    )


def _rewind_arguments(rewind: argparse.ArgumentParser) -> None:
    rewind.add_argument("run_id", help=RUN_NAME_HELP)
    rewind.add_argument(
        "--to",
        type=int,
        required=True,
        metavar="N",
        help="the checkpoint to go on from (overnight status lists the kept ones)",
    )


async def run_rewind(args: argparse.Namespace, connect: Connect) -> int:
    client = await connect(args)
    print(f"{args.run_id}: {terminal_line(await rewind_run(client, args.run_id, args.to))}")
    return 0


async def rewind_run(client: Client, run_id: str, to: int) -> str:
    """The `rewind` update; `WorkspaceRefused` says why not (no kept workspace, no step N)."""
    try:
        said: str = await client.get_workflow_handle(run_id).execute_update(
            REWIND_UPDATE, to, result_type=str
        )
    except WorkflowUpdateFailedError as err:
        why = getattr(err.cause, "message", None) or str(err.cause or err)
        raise WorkspaceRefused(f"run {run_id} was not rewound: {why}") from None
    except RPCError as err:
        raise OvernightError(f"run {run_id} was not rewound: {err.message}") from None
    return said


async def run_diff(args: argparse.Namespace, connect: Connect) -> int:
    from overnight.cli import client as api
    from overnight.worker.run_history import run_spec

    raw = raw_stdout() if args.raw else None  # refused on a terminal before anything is read
    client = await connect(args)
    status = await api.get_status(client, args.run_id)
    kept = chosen(status, args.step)
    repo = args.repo or (await run_spec(client, args.run_id)).repo
    base = status.workspace.base if status.workspace else None
    since = None
    if args.step is not None and status.workspace is not None:
        since = kept_before(status.workspace.kept, kept)
    data = await asyncio.to_thread(
        diff_bytes, clone_source(repo), kept, base, stat=args.stat, since=since
    )
    if raw is not None:
        raw.write(data)
        raw.flush()
    else:
        # The agent's files, names and words: its lines and tabs kept, every other control
        # (and a byte that is not UTF-8) shown as its escape.
        sys.stdout.write(shown(data))
    return 0


def chosen(status: RunStatus, step: int | None) -> KeptWorkspace:
    """The kept workspace `diff` shows (`WorkspaceRefused` when there is none to show)."""
    view = status.workspace
    if view is None:
        raise WorkspaceRefused(f"run {status.run_id} does not keep its workspace")
    record = latest_pushed(view.kept) if step is None else find(view.kept, step)
    if record is None and step is None:
        raise WorkspaceRefused(f"run {status.run_id} has no kept workspace yet")
    if record is None:
        # N is the n-th checkpoint the run saw, not the agent's own count: say which exist.
        raise WorkspaceRefused(
            f"run {status.run_id} has no checkpoint {step} (kept: {kept_numbers(view.kept)}; "
            f"numbered as the run saw them: checkpoints written between two of its looks are "
            f"kept as one)"
        )
    if record.outcome != "pushed" or record.commit is None or record.ref is None:
        why = record.detail or record.outcome
        raise WorkspaceRefused(f"checkpoint {record.number}'s workspace was not kept: {why}")
    return record


def kept_before(kept: list[KeptWorkspace], record: KeptWorkspace) -> KeptWorkspace | None:
    """The workspace kept (pushed) at the checkpoint before `record`'s; None: it is the
    run's first, and its work is diffed from where the run started."""
    earlier = [k for k in kept if k.number < record.number and k.outcome == "pushed"]
    found = max(earlier, key=lambda k: k.number, default=None)
    return found if found is not None and found.ref and found.commit else None


def diff_text(
    repo: str,
    kept: KeptWorkspace,
    base: str | None,
    *,
    stat: bool = False,
    since: KeptWorkspace | None = None,
) -> str:
    """`diff_bytes` as text (a byte that is not UTF-8 replaced), as the agent wrote it."""
    return diff_bytes(repo, kept, base, stat=stat, since=since).decode("utf-8", errors="replace")


def diff_bytes(
    repo: str,
    kept: KeptWorkspace,
    base: str | None,
    *,
    stat: bool = False,
    since: KeptWorkspace | None = None,
    most: int | None = None,
) -> bytes:
    """The diff to the kept workspace from `since` (an earlier kept workspace) when given,
    else from where the run started (`base`, else the merge base with the origin's default
    branch, else the empty tree). With `most` (a reader that shows a part, the console): at
    most `most` bytes of it, git stopped past them, and binary files named, not patched (the
    agent's files can be of any size; what git writes is not held whole)."""
    assert kept.commit is not None
    with tempfile.TemporaryDirectory(prefix="overnight-diff-") as where:
        _git(where, "init", "--quiet", "--bare", ".")
        _fetch_kept(where, repo, kept)
        if since is not None and since.commit is not None:
            _fetch_kept(where, repo, since)
            start = since.commit
        else:
            start = _run_start(where, repo, kept.commit, base)
        options = ["--stat"] if stat else [] if most is not None else ["--binary"]
        diff = ["diff", "--no-ext-diff", "--no-textconv", "--no-color", *options]
        if most is not None:
            return _git_head(where, most, *diff, start, kept.commit)
        return _git_bytes(where, *diff, start, kept.commit)


def _fetch_kept(where: str, repo: str, kept: KeptWorkspace) -> None:
    """Fetch `kept`'s ref, and check it holds the commit the run recorded."""
    assert kept.ref is not None and kept.commit is not None
    _git(where, *_fetch(repo), f"+{kept.ref}:{kept.ref}", repo=repo)
    got = _git(where, "rev-parse", "--verify", f"{kept.ref}^{{commit}}").strip()
    if got != kept.commit:
        raise OvernightError(f"{kept.ref} in {redact_url(repo)} is {got}, not {kept.commit}")


def _run_start(where: str, repo: str, commit: str, base: str | None) -> str:
    """Where the run started, for a diff of its whole work: its base; else the agent's
    commit's merge base with the origin's default branch; else the empty tree (the origin
    had no commit: everything is the run's)."""
    if base and _has(where, base):
        return base
    default = "refs/overnight-diff/default"
    if _git_ok(where, *_fetch(repo), f"+HEAD:{default}") is not None:
        # The kept commit's first parent is the agent's HEAD (its second, the checkpoint's).
        found = _git_ok(where, "merge-base", f"{commit}^1", default)
        if found:
            return found.strip()
    return _git(where, "hash-object", "-t", "tree", "/dev/null").strip()


def _fetch(repo: str) -> list[str]:
    """`git fetch` of `repo`, its refspecs to follow."""
    local = [_LOCAL_UPLOAD_PACK] if local_repo_path(repo) is not None else []
    return ["fetch", "--quiet", "--no-tags", *local, "--", repo]


def _git_ok(where: str, *args: str) -> str | None:
    """git's output, or None when it failed (a question whose no is an answer)."""
    done = run_git(*args, cwd=where, timeout=FETCH_SECONDS, any_owner=True, text=True)
    return done.stdout if done.returncode == 0 else None


def _has(where: str, commit: str) -> bool:
    return _git_ok(where, "cat-file", "-e", f"{commit}^{{commit}}") is not None


def _git(where: str, *args: str, repo: str | None = None) -> str:
    return _git_bytes(where, *args, repo=repo).decode("utf-8", errors="replace")


def _git_head(where: str, most: int, *args: str) -> bytes:
    """The first `most` bytes of what git writes; git is stopped once it wrote more (or
    after FETCH_SECONDS)."""
    with (
        tempfile.TemporaryFile() as errors,
        subprocess.Popen(
            git_command(*args, any_owner=True),
            cwd=where,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=no_prompt(),
        ) as git,
    ):
        assert git.stdout is not None
        timer = threading.Timer(FETCH_SECONDS, git.kill)
        timer.start()
        try:
            data = git.stdout.read(most)
            cut = len(data) == most and git.stdout.read(1) != b""
            if cut:
                git.kill()
            code = git.wait()
        finally:
            timer.cancel()
        if not cut and code != 0:
            errors.seek(0)
            why = errors.read(4096).decode("utf-8", errors="replace").strip()[-400:]
            raise OvernightError(f"git {args[0]} failed: {one_line(why)}")
        return data


def _git_bytes(where: str, *args: str, repo: str | None = None) -> bytes:
    done = run_git(*args, cwd=where, timeout=FETCH_SECONDS, any_owner=True)
    if done.returncode != 0:
        # What the origin said may be the agent's (a hook's message, a ref's name): one line,
        # and the command prints it through the same escaping as the rest.
        why = done.stderr.decode("utf-8", errors="replace").strip()[-400:]
        if repo is not None:
            why = scrub_url(why, repo)
        raise OvernightError(f"git {args[0]} failed: {one_line(why)}")
    return done.stdout


COMMANDS = (
    Command(
        "diff",
        "what the agent changed: from where the run started to its last kept workspace "
        "(--step N: from the checkpoint before N to N)",
        _diff_arguments,
        lambda args: run_diff(args, connect),
    ),
    Command(
        "rewind",
        "go on from checkpoint N and the workspace kept with it",
        _rewind_arguments,
        lambda args: run_rewind(args, connect),
    ),
)
