"""A pull request's CI, watched: the `watch_checks` activity (CI rounds,
overnight/core/ci_rounds.py).

One call watches the check runs and commit statuses GitHub reports on the pushed commit
(activities/github/checks.py) for up to `wait_seconds`, polling every `poll_seconds`, and
returns as soon as they are no longer pending: one activity per window rather than one per
poll keeps the run's history short (a CI of an hour at a poll a minute is a handful of events,
not hundreds). Every poll is a conditional request (`If-None-Match`, the worker's ETag cache),
so an unchanged answer costs no request of the rate limit. The call heartbeats while it waits,
and is cancelled at once when the run is.

The token is the worker's (`OVERNIGHT_GITHUB_TOKEN`), as for the pull request. A rate limit or
a server error the client could not wait out is retried by Temporal after GitHub's wait;
anything else (no token, a repository GitHub does not know) fails as `ChecksUnreadable`.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import non_retryable
from activities.github import (
    ChecksState,
    FailedCheck,
    GitHubError,
    client_for,
    parse_repo_url,
    read_checks,
)
from activities.heartbeat import auto_heartbeat
from activities.models import ActivityName
from activities.models.delivery import ChecksSeen, WatchChecksInput
from overnight.core.ci_rounds import FailingCheck

CHECKS_UNREADABLE = "ChecksUnreadable"
GITHUB_UNAVAILABLE = "GitHubUnavailable"
NOT_READ = "the pull request's checks could not be read: "


class CiActivities:
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        # The worker's environment (read at each call: a token rotated needs no restart).
        self._environ = environ

    def all(self) -> list[Callable[..., Any]]:
        return [self.watch_checks]

    @activity.defn(name=ActivityName.WATCH_CHECKS)
    async def watch_checks(self, input: WatchChecksInput) -> ChecksSeen:
        environ = self._environ if self._environ is not None else os.environ
        async with auto_heartbeat():
            try:
                return await watch(input, environ)
            except GitHubError as error:
                raise checks_error(error) from None


async def watch(input: WatchChecksInput, environ: Mapping[str, str]) -> ChecksSeen:
    """Poll until the checks are no longer pending (or unreported), or the window ends."""
    try:
        repo = parse_repo_url(input.spec.repo)
    except ValueError as why:
        raise non_retryable(CHECKS_UNREADABLE, f"{NOT_READ}the origin is {why}") from None
    client = client_for(repo, environ)
    ends = time.monotonic() + input.wait_seconds
    polls = 0
    while True:
        state = await asyncio.to_thread(read_checks, client, repo, input.commit)
        polls += 1
        left = ends - time.monotonic()
        if state.verdict in ("success", "failure") or left <= 0:
            return seen(state, polls)
        await asyncio.sleep(min(input.poll_seconds, left))


def seen(state: ChecksState, polls: int) -> ChecksSeen:
    return ChecksSeen(
        commit=state.sha,
        verdict=state.verdict,
        failing=[failing(check) for check in state.failed],
        pending=list(state.pending),
        passed=list(state.passed),
        polls=polls,
    )


def failing(check: FailedCheck) -> FailingCheck:
    return FailingCheck(
        name=check.name,
        kind=check.kind,
        conclusion=check.conclusion,
        title=check.title,
        summary=check.summary,
        log_tail=check.log_tail,
        url=check.url,
    )


def checks_error(error: GitHubError) -> ApplicationError:
    said = NOT_READ + str(error)
    if error.retryable:
        delay = None if error.wait_seconds is None else timedelta(seconds=error.wait_seconds)
        return ApplicationError(said, type=GITHUB_UNAVAILABLE, next_retry_delay=delay)
    return non_retryable(CHECKS_UNREADABLE, said)
