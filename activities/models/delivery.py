"""The models of a finished run's delivery: its work pushed to its branch on the origin
(activities/delivery/branch_push.py), its pull request (activities/delivery/pull_request.py) and its
CI (activities/delivery/ci_checks.py). One in, one out each."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from overnight.core.ci_rounds import FailingCheck
from overnight.core.done_check import DoneCheck
from overnight.core.models import RestartRecord, RunSpec
from overnight.core.run_costs import SafetyNet
from overnight.core.workspace_spec import KeptWorkspace


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConfirmPushedInput(_Model):
    """Commit the workspace of `sandbox_id` as it stands and push it to the run's branch
    (`refs/heads/<spec.branch>`); the worker confirms the origin holds that commit."""

    spec: RunSpec
    sandbox_id: str
    # The commit's date (the workflow's time of the first try, so every try makes the same).
    at: datetime
    # The latest commit of the run's already on the origin (its objects are not counted).
    previous: str | None = None


class BranchPushed(_Model):
    """The run's branch on the origin holds `commit` (seen there by the worker)."""

    ref: str
    commit: str
    seconds: float = 0


class RunFacts(_Model):
    """What the pull request's body says of the run (overnight/core/pull_request_body.py), as
    the workflow knows it at its finish."""

    run_id: str
    summary: str = ""
    title: str = ""
    done_checks: list[DoneCheck] = Field(default_factory=list)
    attempts: int = 1
    restarts: list[RestartRecord] = Field(default_factory=list)
    fresh_starts: int = 0
    hours_used: float = 0
    spend_usd: float = 0
    spend_model_usd: float = 0
    safety_net: SafetyNet | None = None
    kept: list[KeptWorkspace] = Field(default_factory=list)
    # CI rounds so far (`pull_request.until_checks_pass`), and the checks that failed in them.
    ci_rounds: int = 0
    ci_failed: list[str] = Field(default_factory=list)


class OpenPullRequestInput(_Model):
    """Open the one pull request of `spec.branch` into `spec.pull_request.base`, or bring the
    one open up to date, with the worker's GitHub token."""

    spec: RunSpec
    # The commit the branch was confirmed to hold (the pull request's head).
    commit: str
    facts: RunFacts


class PullRequestOpened(_Model):
    url: str
    number: int
    # This call opened it (False: found open, and brought up to date).
    created: bool = False
    # What this call changed of one found: "title", "body", "labels".
    changed: list[str] = Field(default_factory=list)


class WatchChecksInput(_Model):
    """Watch the check runs and statuses GitHub reports on `commit` (the pull request's head)
    until they are no longer pending or `wait_seconds` pass, polling every `poll_seconds`
    with ETags (an unchanged answer costs no request of the rate limit)."""

    spec: RunSpec
    commit: str
    wait_seconds: float = Field(ge=0)
    poll_seconds: float = Field(gt=0)


class ChecksSeen(_Model):
    """Where the commit's checks stand: "pending", "success", "failure" or "none" (nothing
    reported yet); the failures named, with their log's tail; the polls made."""

    commit: str
    verdict: Literal["pending", "success", "failure", "none"]
    failing: list[FailingCheck] = Field(default_factory=list)
    pending: list[str] = Field(default_factory=list)
    passed: list[str] = Field(default_factory=list)
    polls: int = 0
