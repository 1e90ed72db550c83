"""The `watch_checks` activity's watch (activities/delivery/ci_checks.py) against the fake GitHub:
it polls a commit's check runs and statuses until they are no longer pending, each poll two
conditional requests, and an unchanged answer (`304`) costs nothing of the rate limit. The
figures of docs/pull-requests.md ("What it costs") come from here: requests per poll, and
charged ones per change."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from activities.delivery.ci_checks import watch
from activities.github import API_URL_ENV, TOKEN_ENV
from activities.models.delivery import WatchChecksInput
from fakes.github_api import CheckRun, CommitStatus, FakeGitHub
from overnight.core.models import RunSpec
from tests.github.conftest import BRANCH, TOKEN, git

LOG = "\n".join(f"line {n}" for n in range(100)) + "\nFAILED tests/test_due.py::test_due_date"


def spec() -> RunSpec:
    return RunSpec.model_validate(
        {
            "run_id": "ci-watch",
            "repo": "https://github.com/octo/app.git",
            "agent_dir": "/tmp/agent",
            "command": "true",
            "pull_request": {"until_checks_pass": True},
        }
    )


def environ(github: FakeGitHub) -> dict[str, str]:
    return {TOKEN_ENV: TOKEN, API_URL_ENV: github.api_url}


def head(origin: Path) -> str:
    return git(origin, "rev-parse", BRANCH)


def test_a_watch_polls_until_the_checks_are_done_and_unchanged_polls_are_free(
    github: FakeGitHub, origin: Path
) -> None:
    sha = head(origin)
    github.set_check_runs("octo/app", sha, [CheckRun("tests", status="in_progress")])
    github.add_statuses("octo/app", sha, [CommitStatus("lint", "pending")])

    def done() -> None:
        github.set_check_runs("octo/app", sha, [CheckRun("tests", conclusion="success")])
        github.add_statuses("octo/app", sha, [CommitStatus("lint", "success")])

    # The checks end once the watch has asked 4 times, not after a time: under load (CI-form
    # run 3 of session 30) a second passed in the watch's first two polls.
    stop = threading.Event()

    def done_after_four_polls() -> None:
        while github.count("check_runs") < 4:
            if stop.wait(0.02):
                return
        done()

    ending = threading.Thread(target=done_after_four_polls, daemon=True)
    ending.start()
    try:
        seen = asyncio.run(
            watch(
                WatchChecksInput(spec=spec(), commit=sha, wait_seconds=60, poll_seconds=0.1),
                environ(github),
            )
        )
    finally:
        stop.set()
        ending.join(timeout=5)

    assert (seen.verdict, seen.passed, seen.commit) == ("success", ["tests", "lint"], sha)
    requests = github.count("check_runs") + github.count("combined_status")
    charged = github.count("check_runs", status=200) + github.count("combined_status", status=200)
    unchanged = github.count(status=304)
    # Two requests a poll; only the first answer and the changed one count against the limit.
    assert requests == 2 * seen.polls and seen.polls >= 5
    assert charged == 4 and unchanged == requests - charged
    per_hour_at_60s = 2 * 3600 // 60
    print(
        f"\nCI watch: {seen.polls} polls, {requests} requests, {charged} charged; "
        f"a run-hour of CI at 60 s polls: {per_hour_at_60s} requests, 2 + 2 per change charged"
    )


def test_a_watch_returns_the_failing_check_with_its_logs_tail(
    github: FakeGitHub, origin: Path
) -> None:
    sha = head(origin)
    github.set_check_runs(
        "octo/app",
        sha,
        [
            CheckRun("tests", conclusion="failure", title="1 failed", text=LOG),
            CheckRun("lint", conclusion="success"),
        ],
    )
    seen = asyncio.run(
        watch(
            WatchChecksInput(spec=spec(), commit=sha, wait_seconds=60, poll_seconds=0.1),
            environ(github),
        )
    )
    assert (seen.verdict, seen.polls, seen.passed) == ("failure", 1, ["lint"])
    [failing] = seen.failing
    assert (failing.name, failing.conclusion, failing.title) == ("tests", "failure", "1 failed")
    assert failing.log_tail.endswith("FAILED tests/test_due.py::test_due_date")
    assert "line 0\n" not in failing.log_tail  # its tail, not the whole log


def test_a_watch_ends_with_its_window_when_nothing_is_reported(
    github: FakeGitHub, origin: Path
) -> None:
    seen = asyncio.run(
        watch(
            WatchChecksInput(spec=spec(), commit=head(origin), wait_seconds=0.5, poll_seconds=0.1),
            environ(github),
        )
    )
    assert seen.verdict == "none" and seen.polls >= 2


def test_a_watch_without_a_token_is_refused_at_once(github: FakeGitHub, origin: Path) -> None:
    from activities.delivery.ci_checks import CHECKS_UNREADABLE, CiActivities

    activities = CiActivities(environ={API_URL_ENV: github.api_url})
    request = WatchChecksInput(spec=spec(), commit=head(origin), wait_seconds=1, poll_seconds=1)
    with pytest.raises(Exception) as refused:
        asyncio.run(activities.watch_checks(request))
    assert getattr(refused.value, "type", None) == CHECKS_UNREADABLE
    assert "OVERNIGHT_GITHUB_TOKEN is not set" in str(refused.value)
