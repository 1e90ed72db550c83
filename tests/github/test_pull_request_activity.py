"""The run's pull request (`open_pull_request`) against the fake GitHub and a real bare origin:
one pull request of the run's branch, its body the run's facts in the repository's template,
found and brought up to date on a second call; GitHub's refusals (no token, no permission,
nothing to propose) final and said without the token; a rate limit longer than the client
waits handed to Temporal with the wait GitHub named."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.delivery.pull_request import (
    GITHUB_UNAVAILABLE,
    PULL_REQUEST_REFUSED,
    PullRequestActivities,
)
from activities.github import API_URL_ENV, TOKEN_ENV
from activities.models.delivery import OpenPullRequestInput, PullRequestOpened, RunFacts
from fakes.github_api import FakeGitHub
from overnight.core.done_check import DoneCheck
from overnight.core.models import RestartRecord, RunSpec
from tests.github.conftest import BRANCH, TOKEN, git

AT = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
TEMPLATE = "## What changed\n\n## How it was tested\n"


def run_spec(**pull_request: object) -> RunSpec:
    return RunSpec.model_validate(
        {
            "run_id": "run-1",
            "repo": "https://github.com/octo/app.git",
            "branch": BRANCH,
            "agent_dir": "/tmp/agent",
            "command": "true",
            "pull_request": {"labels": ["overnight"], **pull_request},
        }
    )


def facts() -> RunFacts:
    check = DoneCheck(command="pytest -q", index=0, round=1, passed=True, exit_code=0, at=AT)
    crash = RestartRecord(attempt=1, reason="agent crashed (exit 1)", at=AT)
    return RunFacts(
        run_id="run-1",
        summary="Fixed the parser @octo-team",
        done_checks=[check],
        attempts=2,
        restarts=[crash],
        spend_usd=1.25,
    )


async def open_one(
    environ: Mapping[str, str], origin: Path, spec: RunSpec | None = None
) -> PullRequestOpened:
    given = OpenPullRequestInput(
        spec=spec or run_spec(), commit=git(origin, "rev-parse", BRANCH), facts=facts()
    )
    return await ActivityEnvironment().run(PullRequestActivities(environ).open_pull_request, given)


def worker_env(github: FakeGitHub, token: str = TOKEN) -> dict[str, str]:
    return {TOKEN_ENV: token, API_URL_ENV: github.api_url}


async def test_one_pull_request_holds_the_runs_facts_in_the_template_and_is_updated_after(
    github: FakeGitHub, origin: Path
) -> None:
    github.set_file("octo/app", ".github/pull_request_template.md", TEMPLATE)
    opened = await open_one(worker_env(github), origin)
    again = await open_one(worker_env(github), origin, run_spec(title="Fix the parser, at last"))

    assert (opened.created, opened.number, opened.url) == (True, 1, f"{github.url}/octo/app/pull/1")
    assert (again.created, again.number, again.changed) == (False, 1, ["title"])
    [pull] = github.pulls("octo/app")
    assert pull["head"]["sha"] == git(origin, "rev-parse", BRANCH) and pull["draft"]
    assert pull["title"] == "Fix the parser, at last"
    body = pull["body"]
    assert body.startswith("## What changed\n\n**The agent's summary:**\n\n> Fixed the parser")
    assert "@octo-team" not in body  # no mention of a team from the agent's words
    assert "## How it was tested" in body and "| `pytest -q` | ✅ passed (exit 0) |" in body
    assert "- attempt 1: agent crashed (exit 1)" in body and "$1.25" in body
    assert [label["name"] for label in pull["labels"]] == ["overnight"]
    assert github.count("create_pull") == 1


async def test_no_token_is_refused_at_once_naming_the_variable(
    github: FakeGitHub, origin: Path
) -> None:
    with pytest.raises(ApplicationError) as refused:
        await open_one({API_URL_ENV: github.api_url}, origin)
    assert (refused.value.type, refused.value.non_retryable) == (PULL_REQUEST_REFUSED, True)
    assert TOKEN_ENV in refused.value.message
    assert github.pulls("octo/app") == []


async def test_a_token_without_the_permission_is_refused_at_once_without_the_token(
    github: FakeGitHub, origin: Path
) -> None:
    github.fail("forbidden", route="create_pull")
    with pytest.raises(ApplicationError) as refused:
        await open_one(worker_env(github), origin)
    said = refused.value.message
    assert (refused.value.type, refused.value.non_retryable) == (PULL_REQUEST_REFUSED, True)
    assert said.startswith("the pull request could not be opened: POST") and "403" in said
    assert TOKEN not in said


async def test_a_branch_with_nothing_to_propose_is_refused_saying_so(
    github: FakeGitHub, origin: Path
) -> None:
    git(origin, "update-ref", f"refs/heads/{BRANCH}", "main")
    with pytest.raises(ApplicationError) as refused:
        await open_one(worker_env(github), origin)
    assert refused.value.type == PULL_REQUEST_REFUSED
    assert "no commit its base lacks" in refused.value.message


async def test_a_rate_limit_longer_than_the_client_waits_goes_to_temporal_with_its_wait(
    github: FakeGitHub, origin: Path
) -> None:
    github.fail("secondary", route="create_pull", retry_after=3600)
    with pytest.raises(ApplicationError) as limited:
        await open_one(worker_env(github), origin)
    assert (limited.value.type, limited.value.non_retryable) == (GITHUB_UNAVAILABLE, False)
    assert limited.value.next_retry_delay == timedelta(seconds=3600)
    # The next try (Temporal's, an hour on) finds no pull request opened meanwhile, opens one.
    assert github.pulls("octo/app") == []
    assert (await open_one(worker_env(github), origin)).created
