"""Fixtures of the GitHub tests: a started fake GitHub, a real bare origin with a run's branch
one commit ahead of `main`, and a client of the fake that waits little."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.github import GitHubClient, GitHubRepo, RetryRules
from fakes.github_api import FakeGitHub

TOKEN = "ghp_sEcReT0123456789abcdefTOKEN"
BRANCH = "agent/run-1"
# Short waits where GitHub names none (a server error, a secondary limit without a time).
QUICK = RetryRules(
    first_backoff_seconds=0.05,
    max_backoff_seconds=0.2,
    secondary_wait_seconds=0.1,
    write_gap_seconds=0,
)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    """A bare repository: `main` with one commit, `agent/run-1` one commit past it."""
    bare = tmp_path / "origin.git"
    work = tmp_path / "work"
    git(tmp_path, "init", "--bare", "-b", "main", str(bare))
    git(tmp_path, "clone", "-q", str(bare), str(work))
    (work / "README.md").write_text("app\n")
    git(work, "add", ".")
    git(work, "commit", "-qm", "start")
    git(work, "push", "-q", "origin", "HEAD:main")
    git(work, "switch", "-qc", BRANCH)
    (work / "fix.py").write_text("print('fixed')\n")
    git(work, "add", ".")
    git(work, "commit", "-qm", "the fix")
    git(work, "push", "-q", "origin", BRANCH)
    return bare


@pytest.fixture
def github(origin: Path) -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN) as fake:
        fake.add_repo("octo/app", origin=origin)
        yield fake


@pytest.fixture
def repo() -> GitHubRepo:
    return GitHubRepo(host="github.com", owner="octo", name="app")


@pytest.fixture
def client(github: FakeGitHub) -> GitHubClient:
    return GitHubClient(github.api_url, TOKEN, rules=QUICK)
