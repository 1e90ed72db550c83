"""The worker's GitHub client for a repository: the API URL (the repository's, or
`OVERNIGHT_GITHUB_API_URL`, which wins: a proxy, a fake in tests), the worker's token
(`OVERNIGHT_GITHUB_TOKEN`), and one ETag cache per API URL and token for the worker's life, so a CI
poll of any run finds what the last poll of it got and costs nothing when nothing changed.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Mapping

from activities.github.client import API_URL_ENV, TOKEN_ENV, EtagCache, GitHubClient, GitHubError
from activities.github.repo_url import GitHubRepo
from activities.github.retry import RetryRules

# By API URL and token (a hash of it): one token's cached answers are never another's.
_caches: dict[tuple[str, str], EtagCache] = {}
_caches_lock = threading.Lock()


def api_url(repo: GitHubRepo, environ: Mapping[str, str]) -> str:
    return (environ.get(API_URL_ENV) or "").strip().rstrip("/") or repo.api_url


def client_for(
    repo: GitHubRepo,
    environ: Mapping[str, str],
    *,
    rules: RetryRules | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> GitHubClient:
    """A client of `repo`'s API with the worker's token. `sleep`: how the client waits
    between tries (an activity passes one that heartbeats). `GitHubError` (not retryable on
    this worker) when the token is not set."""
    token = (environ.get(TOKEN_ENV) or "").strip()
    if not token:
        raise GitHubError(f"{TOKEN_ENV} is not set in this worker's environment")
    url = api_url(repo, environ)
    with _caches_lock:
        key = (url, hashlib.sha256(token.encode()).hexdigest())
        cache = _caches.setdefault(key, EtagCache())
    return GitHubClient(url, token, rules=rules or RetryRules(), sleep=sleep, cache=cache)
