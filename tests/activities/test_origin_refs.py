"""The worker's own look at the origin (activities/workspace/origin_refs.py), with real git against
real repositories: it reads the origin's ref as the origin holds it, whatever the worker's git
config and environment say, runs nothing an agent-written origin config or hook names, uses
only the transport the address names, and says a credential of the URL nowhere."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from activities.workspace.origin_refs import (
    OriginUnreadable,
    confirm,
    listed_commit,
    ref_on_origin,
    transport,
)
from fakes.git_http import git_url

REF = "refs/overnight/run-1/1"


def git(cwd: Path, *args: str) -> str:
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    done = subprocess.run(
        ["git", "-c", "safe.directory=*", *ident, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def origin(tmp_path: Path) -> tuple[Path, str]:
    """A bare origin whose REF holds a commit (and a ref that merely ends like it)."""
    work, bare = tmp_path / "work", tmp_path / "origin.git"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    git(work, "commit", "-q", "--allow-empty", "-m", "one")
    first = git(work, "rev-parse", "HEAD")
    git(work, "commit", "-q", "--allow-empty", "-m", "two")
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(work, "push", "-q", str(bare), f"{first}:{REF}", f"HEAD:refs/elsewhere/{REF}")
    return bare, first


def test_the_transport_is_the_one_the_address_names_and_helpers_get_none() -> None:
    assert transport("/srv/git/app.git") == "file"
    assert transport("file:///srv/git/app.git") == "file"
    assert transport("https://github.com/o/app.git") == "https"
    assert transport("http://127.0.0.1:8080/app.git") == "http"
    assert transport("ssh://git@host/app.git") == "ssh"
    assert transport("git@github.com:o/app.git") == "ssh"
    assert transport("git://host/app.git") == "git"
    for helper in ("ext::sh -c touch% /tmp/x", "fd::3", "foo::https://x", "relative/path"):
        assert transport(helper) is None, helper


def test_only_the_exact_ref_counts_in_the_listing() -> None:
    listed = f"aaaa\trefs/elsewhere/{REF}\nbbbb\t{REF}\ncccc\t{REF}^{{}}\n"
    assert listed_commit(listed, REF) == "bbbb"
    assert listed_commit(f"aaaa\trefs/elsewhere/{REF}\n", REF) is None


async def test_the_origin_is_read_as_it_is_whatever_the_workers_git_says(
    origin: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare, first = origin
    decoy = tmp_path / "decoy.git"
    git(tmp_path, "clone", "-q", "--mirror", str(bare), str(decoy))
    git(decoy, "update-ref", REF, git(decoy, "rev-parse", f"refs/elsewhere/{REF}"))
    home = tmp_path / "home"
    home.mkdir()
    redirect = f'[url "{decoy}"]\n\tinsteadOf = {bare}\n'
    (home / ".gitconfig").write_text(redirect)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'url.{decoy}.insteadof'='{bare}'")
    monkeypatch.setenv("GIT_DIR", str(decoy))

    # A plain git here is sent to the decoy; the worker's look is not.
    plain = subprocess.run(["git", "ls-remote", str(bare), REF], capture_output=True, text=True)
    assert listed_commit(plain.stdout, REF) not in (None, first)
    assert await ref_on_origin(str(bare), REF) == first
    assert (await confirm(str(bare), REF, first)).confirmed


async def test_an_origin_config_and_hooks_the_agent_wrote_run_nothing(
    origin: tuple[Path, str], tmp_path: Path
) -> None:
    bare, first = origin
    marker = tmp_path / "ran"
    touch = f"touch {marker}"
    for key in (
        "core.fsmonitor",
        "core.alternateRefsCommand",
        "uploadpack.packObjectsHook",
        "core.pager",
        "core.sshCommand",
        "core.askPass",
        "credential.helper",
    ):
        git(bare, "config", key, f"!{touch}" if key == "credential.helper" else touch)
    git(bare, "config", "core.hooksPath", str(bare / "hooks"))
    for hook in ("post-upload-pack", "pre-upload-pack", "reference-transaction", "post-checkout"):
        (bare / "hooks" / hook).write_text(f"#!/bin/sh\n{touch}\n")
        (bare / "hooks" / hook).chmod(0o755)

    assert await ref_on_origin(str(bare), REF) == first
    assert not marker.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the origin to another user")
async def test_a_local_origin_another_user_owns_is_still_read(origin: tuple[Path, str]) -> None:
    bare, first = origin
    for path in [bare, *bare.rglob("*")]:
        os.chown(path, 65534, 65534, follow_symlinks=False)
    assert await ref_on_origin(str(bare), REF) == first


async def test_a_url_origin_is_read_over_its_own_transport(origin: tuple[Path, str]) -> None:
    bare, first = origin
    url = git_url(bare)
    assert await ref_on_origin(url, REF) == first
    assert await ref_on_origin(url, "refs/overnight/run-1/2") is None


async def test_a_helper_address_runs_nothing_and_a_credential_is_said_nowhere(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(OriginUnreadable, match="no transport"):
        await ref_on_origin(f"ext::sh -c touch% {marker}", REF)
    assert not marker.exists()
    with pytest.raises(OriginUnreadable) as failed:
        await ref_on_origin("http://someone:s3cr3t-token@127.0.0.1:9/app.git", REF)
    assert "s3cr3t-token" not in str(failed.value)


async def test_a_keep_is_confirmed_only_by_its_exact_commit(origin: tuple[Path, str]) -> None:
    bare, first = origin
    other = "0" * 40
    wrong = await confirm(str(bare), REF, other)
    assert not wrong.confirmed and wrong.found == first
    assert wrong.detail == f"the origin holds {first[:12]} there"
    missing = await confirm(str(bare), "refs/overnight/run-1/7", first)
    assert not missing.confirmed and missing.detail == "the origin has no such ref"
    named = await confirm(str(bare), REF, "pushed")
    assert not named.confirmed and named.detail == "the sandbox named no commit id"
