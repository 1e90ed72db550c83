"""A finished run's work on its branch: the `confirm_pushed` activity.

"Finished" means the run's branch on the origin holds its final commit, not that the agent
said it pushed (issue 50: an origin that refused every push let a run finish with its work
only in the sandbox, which was then stopped). So when the agent exits 0 and its done checks
pass, the workspace's clone is committed as it stands and pushed to `refs/heads/<branch>`
from the sandbox, and the worker asks the origin itself (`git ls-remote`) that the branch
holds that exact commit (activities/workspace/work_push.py: one way for every push of the work).

The commit is the agent's HEAD when it left nothing uncommitted, else a commit on top of it
holding the rest (`.gitignore` honoured). The push is never forced: the branch only moves
forward. What went wrong decides how it is tried again:

- the origin could not be reached, or answered a moment behind (`PushFailed`): retried by the
  activity's retry policy, with backoff;
- the origin refused (its words: a permission, a protected branch, a hook, a branch moved
  elsewhere): tried `REFUSAL_TRIES` times in all, then `PushRefused`, not retried: the run
  needs a person, its sandbox paused with the work in it;
- the sandbox is gone (`SandboxGone`): nothing is left to push; the workflow starts again from
  the checkpoint.

Every message is the origin's words with its credentials (and the gateway's token) scrubbed.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import ErrorType, activity_errors, non_retryable
from activities.heartbeat import auto_heartbeat
from activities.models import ActivityName
from activities.models.delivery import BranchPushed, ConfirmPushedInput
from activities.providers.protocol import SandboxNotFound, SandboxNotRunning, SandboxProvider
from activities.sandbox_base.git_words import clone_failure
from activities.workspace.work_push import PUSH_SECONDS, PushOutcome, push_work
from overnight.core.workspace_spec import MAX_WORKSPACE_MIB, size_text

ProviderGetter = Callable[[str], Awaitable[SandboxProvider]]

PUSH_REFUSED = "PushRefused"
PUSH_FAILED = "PushFailed"
# A refusal is tried this many times in all (an origin briefly read-only, a token refreshed
# meanwhile), then the run needs a person.
REFUSAL_TRIES = 3
# The run's work goes to its branch whatever its size, up to the largest workspace a spec may
# keep: the agent's own push would have sent it (max_workspace_mib bounds the keeps).
MAX_PUSH_BYTES = MAX_WORKSPACE_MIB * 1024 * 1024
REFUSED = "the origin refused the push: "


class BranchPushActivities:
    def __init__(self, provider: ProviderGetter, heartbeat_seconds: float | None = None) -> None:
        self._provider = provider
        self._heartbeat_seconds = heartbeat_seconds

    def all(self) -> list[Callable[..., Any]]:
        return [self.confirm_pushed]

    @activity.defn(name=ActivityName.CONFIRM_PUSHED)
    async def confirm_pushed(self, input: ConfirmPushedInput) -> BranchPushed:
        spec = input.spec
        ref = f"refs/heads/{spec.branch}"
        provider = await self._provider(spec.provider)
        began = time.monotonic()
        async with auto_heartbeat(self._heartbeat_seconds):
            with activity_errors():
                try:
                    pushed = await push_work(
                        provider,
                        spec,
                        input.sandbox_id,
                        ref,
                        message=f"overnight: the work run {spec.run_id} left uncommitted",
                        at=input.at,
                        previous=input.previous,
                        max_bytes=MAX_PUSH_BYTES,
                        branch_work=True,
                    )
                except SandboxNotFound:
                    raise _gone(input.sandbox_id, "gone") from None
                except SandboxNotRunning as why:
                    if why.state in ("stopped", "missing"):
                        raise _gone(input.sandbox_id, why.state) from None
                    raise
        if pushed.kind != "pushed" or pushed.commit is None:
            raise push_error(pushed, _attempt())
        return BranchPushed(
            ref=ref, commit=pushed.commit, seconds=round(time.monotonic() - began, 3)
        )


def push_error(pushed: PushOutcome, attempt: int) -> ApplicationError:
    """Why the push did not land, as the workflow reads it: retryable (`PushFailed`) while a
    later try may do, else `PushRefused` (see the module's docstring)."""
    if pushed.kind == "over":
        return non_retryable(
            PUSH_REFUSED,
            f"the run's work was not pushed: it would send {size_text(pushed.bytes)}, over "
            f"the most overnight pushes ({size_text(MAX_PUSH_BYTES)})",
        )
    if pushed.kind == "unconfirmed":
        return ApplicationError(
            f"the origin does not hold the pushed work: the sandbox said it pushed it, but "
            f"{pushed.detail}",
            type=PUSH_FAILED,
        )
    if pushed.kind == "silent":
        why = f"timed out after {PUSH_SECONDS} s" if pushed.timed_out else "ended without a word"
        tail = f": {pushed.detail}" if pushed.detail else ""
        return ApplicationError(f"the push of the run's work {why}{tail}", type=PUSH_FAILED)
    words = pushed.detail
    if words.startswith("git push: "):
        words = words.removeprefix("git push: ").strip()
        failure = clone_failure(words)
        if failure.words != "failed" and not failure.permanent:
            return ApplicationError(f"the origin could not be reached: {words}", type=PUSH_FAILED)
        said = REFUSED + words
    else:
        # It failed before the push (the commit: a broken clone): nothing the origin said.
        said = f"the run's work could not be committed for its push: {words}"
    if attempt < REFUSAL_TRIES:
        return ApplicationError(said, type=PUSH_FAILED)
    return non_retryable(PUSH_REFUSED, said)


def _gone(sandbox_id: str, state: str) -> ApplicationError:
    return non_retryable(
        ErrorType.SANDBOX_GONE, f"sandbox {sandbox_id} is {state}: the run's work was not pushed"
    )


def _attempt() -> int:
    return activity.info().attempt if activity.in_activity() else 1
