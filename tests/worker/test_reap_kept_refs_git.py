"""`overnight reap`'s git on a kept workspace's refs in a local origin: a person's `git init`
(a work tree, not bare) and a bare one, owned by a person while the worker is root (the tests
run as root; as another user they show the plain case). Before, git refused the person's
repository as root's (dubious ownership): the refs were never listed, never deleted."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from overnight.worker.workspace_reaping import (
    Owner,
    delete_refs,
    git_failure,
    kept_refs,
    owner_to_run_as,
)
from tests.e2e.newcomer_home import USER_UID, give_to_the_user, private_home

PERSON = USER_UID  # a person's uid and gid, not root's (no such user is needed)
RUN = "reaped-run"
REFS = [f"refs/overnight/{RUN}/1", f"refs/overnight/{RUN}/2", f"refs/overnight/{RUN}/check-1"]


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        ["git", "-c", "safe.directory=*", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def persons_origin(folder: Path, *, bare: bool) -> Path:
    """A repository with a commit on main and the run's kept refs, packed (a delete then
    rewrites `packed-refs`), in `folder`, PERSON's (when the test runs as root)."""
    work = folder / "work" if bare else folder
    work.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=work)
    (work / "README.md").write_text("hello\n")
    git("add", ".", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "first", cwd=work)
    origin = work
    if bare:
        origin = folder / "origin.git"
        git("clone", "-q", "--bare", str(work), str(origin), cwd=folder)
    head = git("rev-parse", "HEAD", cwd=origin).strip()
    for ref in REFS:
        git("update-ref", ref, head, cwd=origin)
    git("update-ref", "refs/overnight/other-run/1", head, cwd=origin)
    git("pack-refs", "--all", cwd=origin)
    give_to_the_user(folder)
    return origin


def not_the_persons(origin: Path) -> list[str]:
    """What in the repository is no longer its owner's."""
    owner = origin.stat().st_uid
    return [
        str(Path(where) / name)
        for where, dirs, files in os.walk(origin)
        for name in [*dirs, *files]
        if (Path(where) / name).lstat().st_uid != owner
    ]


@pytest.mark.parametrize("bare", [False, True], ids=["git-init", "bare"])
def test_a_persons_origin_has_its_kept_refs_listed_and_deleted_and_stays_theirs(
    tmp_path: Path, bare: bool
) -> None:
    with private_home(tmp_path) as home:
        check_a_persons_origin(persons_origin(home / "person", bare=bare))


def check_a_persons_origin(origin: Path) -> None:
    for url in (str(origin), f"file://{origin}"):
        assert sorted(kept_refs(url)) == sorted([*REFS, "refs/overnight/other-run/1"])
    delete_refs(str(origin), REFS)
    assert kept_refs(str(origin)) == ["refs/overnight/other-run/1"]
    listed = git("for-each-ref", "--format=%(refname)", cwd=origin).split()
    assert listed == ["refs/heads/main", "refs/overnight/other-run/1"]
    # Written as its owner (a root-owned packed-refs would be root's in the person's repo).
    assert not_the_persons(origin) == []


def test_a_local_origins_git_runs_as_its_owner_only_under_a_root_worker() -> None:
    assert owner_to_run_as(0, PERSON, 100) == Owner(PERSON, 100)
    assert owner_to_run_as(0, 0, 0) is None
    assert owner_to_run_as(PERSON, PERSON, PERSON) is None
    assert owner_to_run_as(1000, PERSON, PERSON) is None


def test_a_failed_reap_says_gits_cause_not_the_end_of_its_hint() -> None:
    said = (
        "fatal: detected dubious ownership in repository at '/home/p/repo/.git'\n"
        "To add an exception for this directory, call:\n\n"
        + "\tgit config --global --add safe.directory /home/p/repo\n"
        * 20
    )
    assert git_failure(said) == (
        "fatal: detected dubious ownership in repository at '/home/p/repo/.git'"
    )
    assert git_failure("no cause named\n" + "x" * 400) == "x" * 300
