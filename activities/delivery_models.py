"""The models of a finished run's delivery: its work pushed to its branch on the origin
(activities/branch_push.py) and its pull request (activities/pull_request.py). One in, one
out each."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from overnight.done_check import DoneCheck
from overnight.models import RestartRecord, RunSpec
from overnight.run_costs import SafetyNet
from overnight.workspace_spec import KeptWorkspace


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
    """What the pull request's body says of the run (overnight/pull_request_body.py), as
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
