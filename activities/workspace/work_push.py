"""The run's work pushed from its sandbox to a ref of the origin, and seen there by the worker.

One way for every push of the agent's work off its sandbox: the done check's
(`refs/overnight/<run_id>/check-<n>`, activities/delivery/done_sandbox.py) and the finish's (the
run's branch, activities/delivery/branch_push.py). The workspace's clone is committed as a keep
commits it (activities/workspace/git_scripts.py: the agent's own index, HEAD and git config left
alone), pushed from the sandbox along the sandbox's own way to the origin (the gateway's, for a
local one), and believed only once the worker, asking the origin itself (`git ls-remote`,
activities/workspace/origin_refs.py), finds the ref at that exact commit. What git said comes back
scrubbed of the origin's credentials and of the gateway's token.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from activities.providers.protocol import SandboxProvider
from activities.sandbox_base.setup import clone_source, origin_scrubber, sandbox_origin
from activities.workspace import origin_refs
from activities.workspace.git_scripts import keep_script, said
from overnight.core.models import RunSpec

# The push in the agent's sandbox: killed past this.
PUSH_SECONDS = 300
# What of git's words is kept at most.
WORDS_CHARS = 500

# `pushed`: the origin holds `commit`; `refused`: git could not push (its words in
# `detail`); `over`: the push would send `bytes`, over the limit; `unconfirmed`: the sandbox
# said it pushed, the origin says otherwise; `silent`: the script timed out or said nothing.
PushKind = Literal["pushed", "refused", "over", "unconfirmed", "silent"]


@dataclass(frozen=True)
class PushOutcome:
    kind: PushKind
    commit: str | None = None
    detail: str = ""
    bytes: int = 0
    # The script timed out (`silent`), rather than ended without a word.
    timed_out: bool = False


async def push_work(
    provider: SandboxProvider,
    spec: RunSpec,
    sandbox_id: str,
    ref: str,
    *,
    message: str,
    at: datetime,
    previous: str | None,
    max_bytes: int,
    branch_work: bool = False,
) -> PushOutcome:
    """Commit the workspace of `sandbox_id` and push it to `ref` (see the module's
    docstring). `at`: the commit's date (the workflow's time, so a retry makes the same
    commit); `branch_work`: the run's branch (keep_script's meaning)."""
    repo = await sandbox_origin(provider, sandbox_id, spec.repo)
    script = keep_script(
        repo=repo,
        ref=ref,
        message=message,
        at=at,
        max_bytes=max_bytes,
        checkpoint_path=spec.checkpoint_path,
        max_checkpoint_bytes=spec.max_checkpoint_bytes,
        previous=previous,
        branch_work=branch_work,
    )
    ran = await provider.run(sandbox_id, script, cwd="/workspace", timeout_seconds=PUSH_SECONDS)
    clean = origin_scrubber(spec.repo, repo)
    line = said(ran.stdout)
    if line is not None and line.word == "pushed" and line.args:
        commit = line.args[0]
        # The worker's own view of the origin, never the sandbox's way there (the gateway).
        credential = origin_refs.credential_value(spec.repo_credential)
        check = await origin_refs.confirm(clone_source(spec.repo), ref, commit, credential)
        if check.confirmed:
            return PushOutcome("pushed", commit=commit)
        return PushOutcome("unconfirmed", detail=clean(check.detail)[:WORDS_CHARS])
    if line is not None and line.word == "over" and line.args and line.args[0].isdigit():
        return PushOutcome("over", bytes=int(line.args[0]))
    if line is not None:
        return PushOutcome("refused", detail=clean(line.text)[:WORDS_CHARS])
    return PushOutcome("silent", detail=clean(ran.stderr.strip()[-300:]), timed_out=ran.timed_out)
