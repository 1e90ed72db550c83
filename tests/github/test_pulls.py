"""The one pull request of a run's branch, against the fake GitHub and a real bare origin:
found before it is opened, never opened twice (a lost `201`, a race, a 403 or 5xx on the
way), brought up to date, and refused for the reasons GitHub refuses one."""

from __future__ import annotations

from pathlib import Path

import pytest

from activities.github import (
    BranchMissing,
    GitHubClient,
    GitHubRepo,
    NothingToPropose,
    PullRequest,
    ensure_pull_request,
)
from fakes.github_api import FakeGitHub
from tests.github.conftest import BRANCH, git


def ensure(
    client: GitHubClient,
    repo: GitHubRepo,
    *,
    head: str = BRANCH,
    title: str = "Fix the parser",
    body: str = "The body",
    labels: tuple[str, ...] = ("overnight",),
) -> PullRequest:
    return ensure_pull_request(
        client, repo, head=head, base="main", title=title, body=body, labels=labels
    )


def test_a_run_opens_one_pull_request_whose_head_is_the_pushed_commit(
    github: FakeGitHub, client: GitHubClient, repo: GitHubRepo, origin: Path
) -> None:
    opened = ensure_pull_request(
        client, repo, head=BRANCH, base="main", title="Fix", body="B", labels=["overnight"]
    )
    assert opened.created and opened.number == 1 and opened.draft
    assert opened.html_url == f"{github.url}/octo/app/pull/1"
    assert opened.head_sha == git(origin, "rev-parse", BRANCH)
    [pull] = github.pulls("octo/app")
    assert [label["name"] for label in pull["labels"]] == ["overnight"]
    assert (github.count("list_pulls"), github.count("create_pull")) == (1, 1)


def test_a_second_call_finds_the_pull_request_and_changes_only_what_differs(
    github: FakeGitHub, client: GitHubClient, repo: GitHubRepo
) -> None:
    first = ensure(client, repo)
    same = ensure(client, repo)
    changed = ensure(client, repo, body="A new body", labels=("overnight", "ci"))
    assert not same.created and same.changed == () and same.number == first.number
    assert changed.changed == ("body", "labels")
    [pull] = github.pulls("octo/app")
    assert pull["body"] == "A new body" and pull["title"] == "Fix the parser"
    assert github.count("create_pull") == 1 and github.count("update_pull") == 1


def test_a_label_a_person_added_is_kept(
    github: FakeGitHub, client: GitHubClient, repo: GitHubRepo
) -> None:
    ensure(client, repo)
    client.post("/repos/octo/app/issues/1/labels", {"labels": ["needs-review"]})
    ensure(client, repo, labels=("overnight",))
    [pull] = github.pulls("octo/app")
    assert sorted(label["name"] for label in pull["labels"]) == ["needs-review", "overnight"]


def test_a_create_whose_answer_was_lost_and_is_sent_again_leaves_one_pull_request(
    github: FakeGitHub, client: GitHubClient, repo: GitHubRepo
) -> None:
    # GitHub made the pull request, but its 201 never arrived (a 502 from the proxy in front).
    github.fail("server", route="create_pull", after=True)
    opened = ensure(client, repo)
    assert len(github.pulls("octo/app")) == 1 and opened.number == 1
    assert github.count("create_pull", status=502) == 1
    assert github.count("create_pull", status=422) == 1  # "already exists": looked up again
    assert not opened.created


def test_a_create_that_races_another_takes_the_other_s_pull_request(
    github: FakeGitHub, client: GitHubClient, repo: GitHubRepo
) -> None:
    # Another worker's create lands between this one's lookup and its create.
    github.before("create_pull", lambda: github.open_pull("octo/app", BRANCH, "main", "theirs"))
    opened = ensure(client, repo, title="ours")
    [pull] = github.pulls("octo/app")
    assert opened.number == pull["number"] and opened.changed == ("title", "body", "labels")
    assert pull["title"] == "ours"
    assert github.count("create_pull", status=422) == 1  # GitHub refused the second


def test_secondary_rate_limits_and_server_errors_are_waited_out_without_a_second_pull_request(
    github: FakeGitHub, client: GitHubClient, repo: GitHubRepo
) -> None:
    github.fail("secondary", route="create_pull", retry_after=1)
    github.fail("server", route="list_pulls", times=2, status=503)
    github.fail("secondary", route="add_labels", status=429)  # names no time: a short wait
    ensure(client, repo)
    assert len(github.pulls("octo/app")) == 1
    assert github.count("create_pull") == 2 and github.count("list_pulls") == 3


def test_a_head_with_nothing_new_opens_nothing(
    github: FakeGitHub, client: GitHubClient, repo: GitHubRepo
) -> None:
    with pytest.raises(NothingToPropose, match="No commits between main and main"):
        ensure(client, repo, head="main")
    assert github.pulls("octo/app") == []


def test_a_branch_the_origin_lacks_opens_nothing(
    github: FakeGitHub, client: GitHubClient, repo: GitHubRepo
) -> None:
    with pytest.raises(BranchMissing, match="head invalid"):
        ensure(client, repo, head="agent/never-pushed")
    assert github.pulls("octo/app") == []


def test_a_closed_pull_request_is_not_reopened_a_new_one_is_opened(
    github: FakeGitHub, client: GitHubClient, repo: GitHubRepo
) -> None:
    ensure(client, repo)
    client.patch("/repos/octo/app/pulls/1", {"state": "closed"})
    opened = ensure(client, repo)
    assert opened.number == 2 and opened.created
