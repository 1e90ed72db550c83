"""Where a commit's CI stands: check runs and commit statuses in one verdict (pure), read
from the fake GitHub with ETags (an unchanged poll costs nothing), and the repository's pull
request template, read where GitHub looks for one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from activities.github import (
    GitHubClient,
    GitHubRepo,
    combine,
    read_checks,
    read_pull_request_template,
)
from fakes.github_api import CheckRun, CommitStatus, FakeGitHub
from tests.github.conftest import BRANCH, QUICK, TOKEN, git


def run(
    name: str, status: str = "completed", conclusion: str | None = "success", **output: str
) -> dict[str, Any]:
    return {"name": name, "status": status, "conclusion": conclusion, "output": output}


def status(context: str, state: str, description: str = "") -> dict[str, Any]:
    return {"context": context, "state": state, "description": description}


def test_nothing_reported_is_none_not_pending() -> None:
    assert combine("s", [], []).verdict == "none"


@pytest.mark.parametrize(
    ("runs", "statuses", "verdict"),
    [
        ([run("test")], [status("ci", "success")], "success"),
        ([run("lint", conclusion="neutral"), run("docs", conclusion="skipped")], [], "success"),
        ([run("test", status="in_progress", conclusion=None)], [], "pending"),
        ([run("test")], [status("ci", "pending")], "pending"),
        ([run("test", status="queued", conclusion=None)], [status("ci", "error")], "failure"),
        ([run("test", conclusion="timed_out")], [], "failure"),
        ([run("test", conclusion="cancelled")], [status("ci", "success")], "failure"),
    ],
)
def test_one_verdict_of_check_runs_and_statuses(
    runs: list[dict[str, Any]], statuses: list[dict[str, Any]], verdict: str
) -> None:
    assert combine("s", runs, statuses).verdict == verdict


def test_a_failure_is_named_with_its_summary_and_the_tail_of_its_log() -> None:
    log = "\n".join(f"line {i}" for i in range(500)) + "\nFAILED test_parser.py::test_empty"
    state = combine(
        "s",
        [run("tests", conclusion="failure", title="1 failed", summary="pytest", text=log)],
        [status("deploy/preview", "failure", "preview broke")],
    )
    failed_run, failed_status = state.failed
    assert (failed_run.name, failed_run.kind, failed_run.title) == (
        "tests",
        "check_run",
        "1 failed",
    )
    assert failed_run.log_tail.endswith("FAILED test_parser.py::test_empty")
    assert "line 0\n" not in failed_run.log_tail and len(failed_run.log_tail) <= 4096
    assert (failed_status.name, failed_status.summary) == ("deploy/preview", "preview broke")


def test_read_checks_reads_both_kinds_and_an_unchanged_poll_costs_nothing(
    github: FakeGitHub, client: GitHubClient, repo: GitHubRepo, origin: Path
) -> None:
    sha = git(origin, "rev-parse", BRANCH)
    github.set_check_runs("octo/app", sha, [CheckRun("tests", status="in_progress")])
    github.add_statuses("octo/app", sha, [CommitStatus("ci/lint", "success")])
    first = read_checks(client, repo, sha)
    assert (first.verdict, first.pending, first.passed) == ("pending", ("tests",), ("ci/lint",))
    again = read_checks(client, repo, sha)
    assert again.unchanged and again.verdict == "pending"
    assert github.count(status=304) == 2
    github.set_check_runs("octo/app", sha, [CheckRun("tests", conclusion="failure", text="boom")])
    github.add_statuses("octo/app", sha, [CommitStatus("ci/lint", "success")])
    failed = read_checks(client, repo, sha)
    assert not failed.unchanged and failed.verdict == "failure"
    assert [f.log_tail for f in failed.failed] == ["boom"]


@pytest.mark.parametrize(
    ("files", "found"),
    [
        ({".github/pull_request_template.md": "## What\n"}, "## What\n"),
        ({"PULL_REQUEST_TEMPLATE.md": "root\n"}, "root\n"),
        ({"docs/pull_request_template.txt": "docs\n"}, "docs\n"),
        ({"docs/x.md": "x", "pull_request_template.md": "root\n", ".github/ci.yml": ""}, "root\n"),
        (
            {".github/pull_request_template.md": "first", "pull_request_template.md": "root"},
            "first",
        ),
        ({".github/PULL_REQUEST_TEMPLATE/bug.md": "several are chosen in the browser"}, None),
        ({}, None),
    ],
)
def test_the_template_is_read_where_github_looks_for_one(
    files: dict[str, str], found: str | None
) -> None:
    with FakeGitHub(token=TOKEN) as github:
        github.add_repo("octo/app", branches={"main": "a" * 40}, files=files)
        client = GitHubClient(github.api_url, TOKEN, rules=QUICK)
        assert read_pull_request_template(client, GitHubRepo("github.com", "octo", "app")) == found


def test_the_template_of_a_real_origin_is_its_default_branch_s(
    github: FakeGitHub, client: GitHubClient, repo: GitHubRepo, origin: Path, tmp_path: Path
) -> None:
    work = tmp_path / "more"
    git(tmp_path, "clone", "-q", str(origin), str(work))
    (work / ".github").mkdir()
    (work / ".github" / "pull_request_template.md").write_text("## Summary\n\n## Testing\n")
    git(work, "add", ".")
    git(work, "commit", "-qm", "template")
    git(work, "push", "-q", "origin", "HEAD:main")
    assert read_pull_request_template(client, repo) == "## Summary\n\n## Testing\n"
