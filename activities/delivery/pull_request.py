"""A finished run's pull request: the `open_pull_request` activity.

Run once the run's branch on the origin holds its final commit (activities/delivery/branch_push.py):
the one open pull request of the branch into `pull_request.base` is found first and brought
up to date, or opened when there is none (activities/github/pulls.py: GitHub has no
idempotency key for a pull request, so the branch is the key, and a retried or replayed step
never opens two). Its title and body are the ground's (overnight/core/pull_request_body.py), from
the run's facts the workflow sends and the repository's pull request template, with a link to
the run in the Temporal Web UI (`OVERNIGHT_UI_URL`, or the dev server's beside the worker's).

The token is the worker's (`OVERNIGHT_GITHUB_TOKEN`), read here, never in the workflow's
history and never given to a sandbox. GitHub's answers decide the retries: a rate limit or a
server error the client could not wait out (`GitHubError.retryable`) is retried by Temporal
after the wait GitHub named (`next_retry_delay`); anything else (no token, no permission, a
repository GitHub does not know, nothing to propose) fails at once as `PullRequestRefused`
and the run needs a person.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import non_retryable
from activities.github import (
    GitHubError,
    NothingToPropose,
    client_for,
    ensure_pull_request,
    parse_repo_url,
    read_pull_request_template,
)
from activities.heartbeat import auto_heartbeat
from activities.models import ActivityName
from activities.models.delivery import OpenPullRequestInput, PullRequestOpened
from overnight.core.connect import UI_URL_ENV, default_ui_base, web_ui_url
from overnight.core.pull_request_body import PullRequestFacts, pull_request_text

PULL_REQUEST_REFUSED = "PullRequestRefused"
GITHUB_UNAVAILABLE = "GitHubUnavailable"
NOT_OPENED = "the pull request could not be opened: "


class PullRequestActivities:
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        # The worker's environment (read at each call: a token rotated needs no restart).
        self._environ = environ

    def all(self) -> list[Callable[..., Any]]:
        return [self.open_pull_request]

    @activity.defn(name=ActivityName.OPEN_PULL_REQUEST)
    async def open_pull_request(self, input: OpenPullRequestInput) -> PullRequestOpened:
        environ = self._environ if self._environ is not None else os.environ
        link = run_link(environ)
        async with auto_heartbeat():
            try:
                return await asyncio.to_thread(opened, input, environ, link)
            except GitHubError as error:
                raise github_error(error) from None


def opened(input: OpenPullRequestInput, environ: Mapping[str, str], link: str) -> PullRequestOpened:
    """The pull request, opened or brought up to date (blocking: run it in a thread)."""
    spec = input.spec
    wanted = spec.pull_request
    if wanted is None:
        raise non_retryable(PULL_REQUEST_REFUSED, NOT_OPENED + "the spec asks for none")
    try:
        repo = parse_repo_url(spec.repo)
    except ValueError as why:
        raise non_retryable(PULL_REQUEST_REFUSED, f"{NOT_OPENED}the origin is {why}") from None
    client = client_for(repo, environ)
    facts = input.facts
    text = pull_request_text(
        PullRequestFacts(
            run_id=facts.run_id,
            summary=facts.summary,
            title=wanted.title,
            done_checks=facts.done_checks,
            attempts=facts.attempts,
            restarts=facts.restarts,
            fresh_starts=facts.fresh_starts,
            hours_used=facts.hours_used,
            spend_usd=facts.spend_usd,
            spend_model_usd=facts.spend_model_usd,
            safety_net=facts.safety_net,
            kept=facts.kept,
            ci_rounds=facts.ci_rounds,
            ci_failed=facts.ci_failed,
            run_link=link,
            template=read_pull_request_template(client, repo),
        )
    )
    pull = ensure_pull_request(
        client,
        repo,
        head=spec.branch,
        base=wanted.base,
        title=text.title,
        body=text.body,
        draft=wanted.draft,
        labels=wanted.labels,
    )
    return PullRequestOpened(
        url=pull.html_url, number=pull.number, created=pull.created, changed=list(pull.changed)
    )


def github_error(error: GitHubError) -> ApplicationError:
    """GitHub's answer as Temporal retries it: after the wait GitHub named when a later try
    may do, else at once a failure the run needs a person for."""
    said = str(error)
    if isinstance(error, NothingToPropose):
        said = f"the branch has no commit its base lacks ({said})"
    if error.retryable:
        delay = None if error.wait_seconds is None else timedelta(seconds=error.wait_seconds)
        return ApplicationError(NOT_OPENED + said, type=GITHUB_UNAVAILABLE, next_retry_delay=delay)
    return non_retryable(PULL_REQUEST_REFUSED, NOT_OPENED + said)


def run_link(environ: Mapping[str, str]) -> str:
    """The run in the Temporal Web UI ("" when the worker cannot tell where that is)."""
    if not activity.in_activity():
        return ""
    try:
        target = activity.client().service_client.config.target_host
    except RuntimeError:
        return ""
    base = default_ui_base(target, environ.get(UI_URL_ENV) or None)
    info = activity.info()
    if base is None or not info.workflow_id:
        return ""
    return web_ui_url(base, info.workflow_namespace or "default", info.workflow_id)
