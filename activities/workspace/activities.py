"""Keeping a run's workspace: the `keep_workspace` activity (commit it to a private ref and push
it off the sandbox) and the restore half of `create_sandbox` (a fresh sandbox starts from the
latest kept workspace, or the one a rewind names).

The scripts (activities/workspace/git_scripts.py) run in the sandbox through the provider's `run`,
so the push uses the sandbox's own way to the remote and its credentials, as the clone did (but
never the agent's config of where pushes go). What they print is scrubbed of the repository
URL's credentials before it goes anywhere. A keep is `pushed` only once the worker has seen
the origin's ref hold the commit the sandbox named (activities/workspace/origin_refs.py): else it is
`failed`, whatever the sandbox printed. A keep that cannot push (over `max_workspace_mib`, a
refused push, a ref the origin lacks) is an answer, never an error: the run goes on, and the
status says so.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import activity

from activities.errors import activity_errors
from activities.heartbeat import auto_heartbeat
from activities.models import ActivityName
from activities.models.workspace import (
    KeepWorkspaceInput,
    WorkspaceKeep,
    WorkspaceRestore,
    WorkspaceRestored,
)
from activities.providers.protocol import (
    ProviderError,
    SandboxNotFound,
    SandboxNotRunning,
    SandboxProvider,
)
from activities.sandbox_base.checkpoints import read_checkpoint
from activities.sandbox_base.setup import APP_DIR, clone_source, origin_scrubber, sandbox_origin
from activities.workspace import origin_refs
from activities.workspace.git_scripts import keep_script, restore_script, said
from overnight.core.models import RunSpec
from overnight.core.workspace_spec import ref_name, size_text

ProviderGetter = Callable[[str], Awaitable[SandboxProvider]]

# A keep or a restore in the sandbox: killed past this (the activity's own timeout is longer).
KEEP_SECONDS = 300
RESTORE_SECONDS = 600
BASE_SECONDS = 60


class WorkspaceActivities:
    def __init__(self, provider: ProviderGetter, heartbeat_seconds: float | None = None) -> None:
        self._provider = provider
        self._heartbeat_seconds = heartbeat_seconds

    def all(self) -> list[Callable[..., Any]]:
        return [self.keep_workspace]

    @activity.defn(name=ActivityName.KEEP_WORKSPACE)
    async def keep_workspace(self, input: KeepWorkspaceInput) -> WorkspaceKeep:
        provider = await self._provider(input.provider)
        ref = ref_name(input.run_id, input.number)
        repo = await sandbox_origin(provider, input.sandbox_id, input.repo)
        script = keep_script(
            repo=repo,
            ref=ref,
            message=f"overnight: workspace of run {input.run_id} at checkpoint {input.number}",
            at=input.at,
            max_bytes=input.max_bytes,
            checkpoint_path=input.checkpoint_path,
            max_checkpoint_bytes=input.max_checkpoint_bytes,
            previous=input.previous,
        )
        began = time.monotonic()
        async with auto_heartbeat(self._heartbeat_seconds):
            with activity_errors():
                try:
                    ran = await provider.run(
                        input.sandbox_id, script, cwd="/workspace", timeout_seconds=KEEP_SECONDS
                    )
                except SandboxNotRunning as gone:
                    return WorkspaceKeep(outcome="skipped", detail=f"the sandbox is {gone.state}")
                except SandboxNotFound:
                    return WorkspaceKeep(outcome="skipped", detail="the sandbox is gone")
        seconds = round(time.monotonic() - began, 3)
        clean = origin_scrubber(input.repo, repo)
        line = said(ran.stdout)
        if ran.timed_out or line is None:
            why = f"timed out after {KEEP_SECONDS} s" if ran.timed_out else "no answer"
            tail = clean(ran.stderr.strip()[-300:])
            return WorkspaceKeep(
                outcome="failed", seconds=seconds, detail=f"{why}{': ' + tail if tail else ''}"
            )
        if line.word == "pushed" and len(line.args) == 3 and line.args[1].isdigit():
            commit, sent, has_checkpoint = line.args
            # The sandbox's word is not enough: the origin, asked from here, must hold it (the
            # worker's view of it: the spec's folder or URL, not the sandbox's way there).
            credential = origin_refs.credential_value(input.repo_credential)
            check = await origin_refs.confirm(clone_source(input.repo), ref, commit, credential)
            seconds = round(time.monotonic() - began, 3)
            if not check.confirmed:
                said_commit = commit[:12] if origin_refs.COMMIT_ID.match(commit) else "?"
                return WorkspaceKeep(
                    outcome="failed",
                    seconds=seconds,
                    detail=clean(
                        f"the sandbox said it pushed {said_commit} to {ref}, but "
                        f"{check.detail}: not kept"
                    )[:500],
                )
            return WorkspaceKeep(
                outcome="pushed",
                ref=ref,
                commit=commit,
                bytes=int(sent),
                has_checkpoint=has_checkpoint == "1",
                seconds=seconds,
            )
        if line.word == "over" and line.args:
            found = int(line.args[0])
            what = "its changed files" if line.args[1:] == ["files"] else "its push"
            limit = input.max_bytes
            return WorkspaceKeep(
                outcome="over_limit",
                bytes=found,
                seconds=seconds,
                detail=f"{what} would be {size_text(found)}, over max_workspace_mib "
                f"({size_text(limit)}): not pushed",
            )
        return WorkspaceKeep(outcome="failed", seconds=seconds, detail=clean(line.text)[:500])


async def put_back(
    provider: SandboxProvider, sandbox_id: str, spec: RunSpec, restore: WorkspaceRestore | None
) -> dict[str, Any]:
    """`create_sandbox`'s part, after the clone: for a run that keeps its workspace, the
    clone's commit (the run's base, from its first sandbox) and, given one, the kept workspace
    put back (and a rewind's checkpoint read back, with limits and redacted, as any read).
    Nothing for other runs, so their answers hold no field a run begun before does not know."""
    if not spec.keep_workspace:
        return {}
    found: dict[str, Any] = {"workspace_base": await base_commit(provider, sandbox_id)}
    if restore is None:
        return found
    restored = await restore_workspace(provider, sandbox_id, spec, restore)
    found["workspace_restored"] = restored
    if restored.checkpoint_written:
        found["checkpoint_restored"] = await read_checkpoint(
            provider,
            sandbox_id,
            spec.checkpoint_path,
            spec.max_checkpoint_bytes,
            None,
            secret_env=spec.secret_env,
        )
    return found


async def base_commit(provider: SandboxProvider, sandbox_id: str) -> str | None:
    """The commit the clone's branch is at (None: an unborn branch, or it cannot be said)."""
    ran = await provider.run(
        sandbox_id,
        "git -c core.hooksPath=/dev/null rev-parse --verify -q 'HEAD^{commit}'",
        cwd=APP_DIR,
        timeout_seconds=BASE_SECONDS,
    )
    found = ran.stdout.strip()
    return found if ran.exit_code == 0 and len(found) in (40, 64) else None


async def restore_workspace(
    provider: SandboxProvider, sandbox_id: str, spec: RunSpec, restore: WorkspaceRestore
) -> WorkspaceRestored:
    """Put a kept workspace in a fresh clone. A restore that cannot be made is said, not
    raised: the agent then starts from its branch and checkpoint, as without keeping."""
    repo = await sandbox_origin(provider, sandbox_id, spec.repo)
    script = restore_script(
        repo=repo,
        ref=restore.ref,
        commit=restore.commit,
        rewind=restore.rewind,
        checkpoint_path=spec.checkpoint_path,
    )
    clean = origin_scrubber(spec.repo, repo)
    try:
        ran = await provider.run(
            sandbox_id, script, cwd="/workspace", timeout_seconds=RESTORE_SECONDS
        )
    except ProviderError as error:
        if error.retryable:
            raise ProviderError(clean(str(error)), kind=error.kind, retryable=True) from None
        return WorkspaceRestored(status="failed", detail=clean(str(error))[:300])
    line = said(ran.stdout)
    if line is None:
        why = "timed out" if ran.timed_out else clean(ran.stderr.strip()[-300:]) or "no answer"
        return WorkspaceRestored(status="failed", detail=why)
    if line.word == "restored":
        return WorkspaceRestored(status="restored", checkpoint_written="checkpoint" in line.args)
    status = "skipped" if line.word == "skipped" else "failed"
    return WorkspaceRestored(status=status, detail=clean(line.text)[:300])
