"""The fake of a finished run's delivery for `FakeWorld` (fakes/activities.py): the push of
the run's work to its branch (`confirm_pushed`) and its pull request (`open_pull_request`),
registered by the real activities' names.

The origin is a dict of branches; a push lands there unless the test makes the origin refuse
(`refusing`: git's words), and then it fails as the real activity does, try by try
(activities.delivery.branch_push.push_error: retried, then `PushRefused` at its third try). Pull
requests are kept by branch, so a retried or repeated call finds the one it opened, as the
real one finds it on GitHub (activities/github/pulls.py); `pull_errors` fail the next calls.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.delivery.branch_push import push_error
from activities.models import ActivityName
from activities.models.delivery import (
    BranchPushed,
    ChecksSeen,
    ConfirmPushedInput,
    OpenPullRequestInput,
    PullRequestOpened,
    WatchChecksInput,
)
from activities.workspace.work_push import PushOutcome
from overnight.core.ci_rounds import FailingCheck

if TYPE_CHECKING:
    from fakes.activities import FakeWorld

PULLS_URL = "https://github.example/octo/app/pull"


def commit_of(sandbox_id: str, at: str) -> str:
    """The commit a push from `sandbox_id` makes (the same on every try with the same date)."""
    return hashlib.sha1(f"{sandbox_id} {at}".encode()).hexdigest()


class FakeDelivery:
    def __init__(self, world: FakeWorld) -> None:
        self._world = world
        # The origin's branches: name -> commit.
        self.origin: dict[str, str] = {}
        # Every try of a push, and the origin's words while it refuses (None: it takes pushes).
        self.pushes: list[ConfirmPushedInput] = []
        self.refusing: str | None = None
        # The next tries fail like these (whatever the origin says).
        self.push_errors: list[ApplicationError] = []
        # Pull requests by branch, every call's input, and the next calls' failures.
        self.pulls: dict[str, PullRequestOpened] = {}
        self.pull_calls: list[OpenPullRequestInput] = []
        self.pull_errors: list[ApplicationError] = []
        # The pull request's CI: what each watch of the checks sees, in order (then every
        # check passes), and every watch's input.
        self.check_looks: list[ChecksSeen | ApplicationError] = []
        self.watches: list[WatchChecksInput] = []

    def activities(self) -> list[Callable[..., Any]]:
        return [self.confirm_pushed, self.open_pull_request, self.watch_checks]

    @activity.defn(name=ActivityName.WATCH_CHECKS)
    async def watch_checks(self, request: WatchChecksInput) -> ChecksSeen:
        self.watches.append(request)
        if self.check_looks:
            look = self.check_looks.pop(0)
            if isinstance(look, ApplicationError):
                raise look
            return look.model_copy(update={"commit": request.commit})
        return ChecksSeen(commit=request.commit, verdict="success", passed=["tests"], polls=1)

    @activity.defn(name=ActivityName.CONFIRM_PUSHED)
    async def confirm_pushed(self, request: ConfirmPushedInput) -> BranchPushed:
        box = self._world._answering(request.sandbox_id)
        self.pushes.append(request)
        if box.state != "running":
            raise ApplicationError(
                f"sandbox {box.sandbox_id} is {box.state}",
                type="SandboxNotRunning",
                non_retryable=True,
            )
        if self.push_errors:
            raise self.push_errors.pop(0)
        if self.refusing is not None:
            refused = PushOutcome("refused", detail=f"git push: {self.refusing}")
            raise push_error(refused, activity.info().attempt)
        ref = f"refs/heads/{request.spec.branch}"
        commit = commit_of(box.sandbox_id, request.at.isoformat())
        self.origin[request.spec.branch] = commit
        return BranchPushed(ref=ref, commit=commit)

    @activity.defn(name=ActivityName.OPEN_PULL_REQUEST)
    async def open_pull_request(self, request: OpenPullRequestInput) -> PullRequestOpened:
        self.pull_calls.append(request)
        if self.pull_errors:
            raise self.pull_errors.pop(0)
        branch = request.spec.branch
        if self.origin.get(branch) != request.commit:
            raise ApplicationError(
                f"the branch {branch} does not hold {request.commit[:12]}",
                type="PullRequestRefused",
                non_retryable=True,
            )
        found = self.pulls.get(branch)
        if found is not None:
            return found.model_copy(update={"created": False})
        number = len(self.pulls) + 1
        opened = PullRequestOpened(url=f"{PULLS_URL}/{number}", number=number, created=True)
        self.pulls[branch] = opened
        return opened


def checks_failing(name: str = "tests", log: str = "FAILED test_due_date") -> ChecksSeen:
    """A watch that saw check run `name` fail, its log ending in `log`."""
    failed = FailingCheck(name=name, title="1 failed", log_tail=log)
    return ChecksSeen(commit="", verdict="failure", failing=[failed], passed=["lint"], polls=3)


def checks_pending(*names: str) -> ChecksSeen:
    """A watch whose window ended with `names` still running."""
    return ChecksSeen(commit="", verdict="pending", pending=list(names or ["tests"]), polls=10)
