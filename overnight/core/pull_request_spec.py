"""`RunSpec.pull_request`: the pull request a finished run opens on GitHub (docs/pull-requests.md).

Off by default. With it, once the run's done checks pass and its branch on the origin holds
its final commit, the worker opens the one pull request of that branch into `base`, or brings
the one already open up to date (activities/delivery/pull_request.py). What a person writes is held
here, where it is written: a base that is no branch name, a title or a label GitHub would
refuse, are refused before the run begins rather than hours later at its end.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from overnight.core.model_base import _StrictInput

# GitHub's own limits: a label's name is at most 50 characters; a title, 256.
MAX_LABELS = 20
MAX_LABEL_CHARS = 50
MAX_TITLE_CHARS = 256
_NOT_IN_A_BRANCH = re.compile(r"[\s~^:?*\[\\\x00-\x1f\x7f]")


def is_branch_name(value: str) -> bool:
    """A name git takes as a branch (`git check-ref-format --branch`'s main rules)."""
    return bool(value) and not (
        value.startswith(("-", "/", "."))
        or value.endswith(("/", ".lock", "."))
        or ".." in value
        or "//" in value
        or "@{" in value
        or _NOT_IN_A_BRANCH.search(value)
    )


def check_origin_for_pull_request(repo: str) -> None:
    """A pull request needs an origin on a GitHub server: a URL (https, http, ssh or git's
    `user@host:owner/name`), not a folder. Which server it is, is the worker's to find."""
    if repo.startswith(("/", "file:", "~", ".")) or "://" not in repo and ":" not in repo:
        raise ValueError(
            "pull_request: the repo must be a GitHub repository's URL, not a local folder"
        )


class PullRequestSpec(_StrictInput):
    """Open (or update) the run's pull request into `base` once its work is on the origin."""

    base: str = "main"
    draft: bool = True
    # Empty: the first line of the agent's summary (overnight/core/pull_request_body.py).
    title: str = Field(default="", max_length=MAX_TITLE_CHARS)
    labels: list[str] = Field(default_factory=list, max_length=MAX_LABELS)
    # CI rounds: the run finishes only once the pull request's checks pass, the agent started
    # again with a failing one within `Budget.max_ci_rounds` (overnight/core/ci_rounds.py).
    until_checks_pass: bool = False

    @field_validator("base")
    @classmethod
    def _base_is_a_branch(cls, value: str) -> str:
        if not is_branch_name(value):
            raise ValueError(f"base {value[:80]!r} is not a valid git branch name")
        return value

    @field_validator("title")
    @classmethod
    def _title_one_line(cls, value: str) -> str:
        if any(ch in value for ch in "\r\n\x00"):
            raise ValueError("title must be one line")
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: list[str]) -> list[str]:
        for label in value:
            if not label.strip() or len(label) > MAX_LABEL_CHARS or "," in label:
                raise ValueError(
                    f"label {label[:60]!r}: 1 to {MAX_LABEL_CHARS} characters, no comma"
                )
            if any(ord(ch) < 32 for ch in label):
                raise ValueError(f"label {label[:60]!r} holds a control character")
        return value
