"""GitHub from the worker: the run's pull request and its CI.

`client.py` speaks the REST API (github.com or Enterprise, the worker's token, GitHub's
retry rules, ETags); `connect.py` makes the worker's client of a repository
(`client_for`); `retry.py` holds the retry rules (pure); `repo_url.py` reads which
repository an origin is (pure); `pulls.py` finds, opens and updates the one pull request of
a branch; `templates.py` reads the repository's pull request template; `checks.py` says
where a commit's check runs and statuses stand. Nothing here runs in a sandbox, and no
sandbox is ever given the token.
"""

from activities.github.checks import ChecksState, FailedCheck, combine, read_checks
from activities.github.client import API_URL_ENV, TOKEN_ENV, EtagCache, GitHubClient, GitHubError
from activities.github.connect import client_for
from activities.github.pulls import (
    BranchMissing,
    NothingToPropose,
    PullRequest,
    ensure_pull_request,
    find_open_pull_request,
)
from activities.github.repo_url import GitHubRepo, api_url_for, parse_repo_url
from activities.github.retry import RetryRules
from activities.github.templates import read_pull_request_template

__all__ = [
    "API_URL_ENV",
    "TOKEN_ENV",
    "BranchMissing",
    "ChecksState",
    "EtagCache",
    "FailedCheck",
    "GitHubClient",
    "GitHubError",
    "GitHubRepo",
    "NothingToPropose",
    "PullRequest",
    "RetryRules",
    "api_url_for",
    "client_for",
    "combine",
    "ensure_pull_request",
    "find_open_pull_request",
    "parse_repo_url",
    "read_checks",
    "read_pull_request_template",
]
