"""A run's origin served to its sandbox by the gateway, on real bubblewrap sandboxes and real
git: the sandbox clones, fetches and pushes its branch and its private refs with no bind of
the folder and no write permission on it, and any other ref is refused with a line git
prints. On the last main a sandbox pushed to an origin only through a writable bind, to any
ref the folder's permissions allowed."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.gateway.service import Gateway
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

RUN = "gitrun-1"
OWNER = 4242
BRANCH = f"agent/{RUN}"


def git(*args: str, cwd: Path | None = None) -> str:
    trust = ["-c", "safe.directory=*"]  # the test reads a repository of another user's
    done = subprocess.run(
        ["git", *trust, *args], cwd=cwd, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def origin() -> Iterator[Path]:
    """A working repository (as the README's `"repo": "../app"`), readable by all, writable
    by its owner only, in a folder its owner may enter (not pytest's, which is its user's
    alone)."""
    shown = Path(tempfile.mkdtemp(prefix="overnight-origin-"))
    shown.chmod(0o755)
    try:
        yield _repository(shown / "app")
    finally:
        shutil.rmtree(shown, ignore_errors=True)


def _repository(repo: Path, *, as_a_person: bool = True) -> Path:
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "README.md").write_text("hello\n")
    git("add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "first", cwd=repo)
    for folder, _, files in os.walk(repo):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(Path(folder) / name, 0o644)
    if as_a_person and os.geteuid() == 0:  # a person's repository, under a root worker
        for folder, _, files in os.walk(repo):
            os.chown(folder, OWNER, OWNER)
            for name in files:
                os.chown(Path(folder) / name, OWNER, OWNER)
    return repo


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[LocalEngine]:
    home = tmp_path / "home"
    gateway = Gateway(home)
    gateway.start()
    engine = LocalEngine(home)
    yield engine
    for meta in engine.list_sandboxes():
        engine.stop(meta.id)
    gateway.stop()


def sandbox_with_clone(engine: LocalEngine, origin: Path) -> tuple[str, str]:
    name = f"gitgw-{uuid.uuid4().hex[:8]}"
    engine.get_or_create(
        name,
        timeout_seconds=120,
        egress=[],
        origin={"path": str(origin), "branch": BRANCH, "run_id": RUN},
    )
    remote = asyncio.run(LocalProvider(engine).git_remote(name))
    assert remote is not None and remote.endswith("/app") and "/git/" in remote
    done = engine.run(name, f"git clone -q {remote} /workspace/app", timeout_seconds=60)
    assert done.exit_code == 0, done.stderr
    return name, remote


def sh(engine: LocalEngine, sid: str, script: str) -> tuple[int, str]:
    setup = (
        "cd /workspace/app && git config user.name agent && git config user.email a@e && "
        "git switch -q -c " + BRANCH + " 2>/dev/null || git switch -q " + BRANCH + "; "
    )
    done = engine.run(sid, setup + script, timeout_seconds=60)
    return done.exit_code, done.stdout + done.stderr


def test_the_runs_branch_and_private_refs_are_pushed_without_a_bind_or_a_chmod(
    engine: LocalEngine, origin: Path
) -> None:
    sid, _ = sandbox_with_clone(engine, origin)
    code, said = sh(
        engine,
        sid,
        "echo work > work.txt && git add work.txt && git commit -qm work && "
        f"git push -q origin HEAD:refs/heads/{BRANCH} && "
        f"git push -q origin HEAD:refs/overnight/{RUN}/keep-1",
    )
    assert code == 0, said
    pushed = git("rev-parse", f"refs/heads/{BRANCH}", cwd=origin)
    assert git("rev-parse", f"refs/overnight/{RUN}/keep-1", cwd=origin) == pushed
    assert git("show", f"{pushed}:work.txt", cwd=origin) == "work"
    # Written as the folder's owner: nothing in it the user could not write again.
    owners = {p.stat().st_uid for p in (origin / ".git").rglob("*")}
    assert owners == {origin.stat().st_uid}
    if os.geteuid() == 0:
        assert owners == {OWNER}
    # And fetched back as any clone would.
    code, said = sh(engine, sid, f"git fetch -q origin && git rev-parse origin/{BRANCH}")
    assert code == 0 and said.strip().endswith(pushed), said


def test_a_push_bigger_than_gits_post_buffer_is_taken(engine: LocalEngine, origin: Path) -> None:
    """git probes before a push over its `http.postBuffer` (1 MiB) with a body of one flush
    packet; the gateway took it for a push without commands and answered 400, so no big push
    (a finished run's work with a build output in it) could pass."""
    sid, _ = sandbox_with_clone(engine, origin)
    code, said = sh(
        engine,
        sid,
        "head -c 3000000 /dev/urandom > big.bin && git add big.bin && git commit -qm big && "
        f"git push -q origin HEAD:refs/heads/{BRANCH}",
    )
    assert code == 0, said
    pushed = git("rev-parse", f"refs/heads/{BRANCH}", cwd=origin)
    assert git("cat-file", "-s", f"{pushed}:big.bin", cwd=origin) == "3000000"


@pytest.mark.parametrize(
    "ref", ["refs/heads/main", "refs/tags/v1", "refs/overnight/other-run/keep-1", "refs/heads/x"]
)
def test_a_push_to_any_other_ref_is_refused_with_a_line_git_prints(
    engine: LocalEngine, origin: Path, ref: str
) -> None:
    before = git("for-each-ref", cwd=origin)
    sid, _ = sandbox_with_clone(engine, origin)
    code, said = sh(
        engine,
        sid,
        "echo evil > evil.txt && git add evil.txt && git commit -qm evil && "
        f"git push origin HEAD:{ref}",
    )
    assert code != 0
    assert "[remote rejected]" in said and "overnight: this run may push only" in said, said
    assert git("for-each-ref", cwd=origin) == before


def test_one_refused_ref_refuses_the_whole_push(engine: LocalEngine, origin: Path) -> None:
    sid, _ = sandbox_with_clone(engine, origin)
    code, said = sh(
        engine,
        sid,
        "echo x > x.txt && git add x.txt && git commit -qm x && "
        f"git push origin HEAD:refs/heads/{BRANCH} HEAD:refs/heads/main",
    )
    assert code != 0 and "another ref of this push was refused" in said, said
    assert BRANCH not in git("for-each-ref", cwd=origin)


def test_the_origin_url_is_refused_without_the_sandboxs_own_token(
    engine: LocalEngine, origin: Path
) -> None:
    sid, remote = sandbox_with_clone(engine, origin)
    stolen = remote.replace(sid, "gitgw-other000")
    code, said = sh(engine, sid, f"GIT_TERMINAL_PROMPT=0 git ls-remote {stolen}")
    assert code != 0 and "not found" in said, said
    engine.stop(sid)
    done = subprocess.run(
        ["git", "ls-remote", remote],
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )
    assert done.returncode != 0  # a stopped sandbox's token opens nothing


TOKEN_ENV = "OVERNIGHT_TEST_GIT_TOKEN"


@pytest.fixture
def private_origin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """A bare repository behind a loopback git server that asks for a token (as a private
    repository on GitHub does); the worker holds the token in its environment."""
    from fakes.git_http import private_git_url

    work = _repository(tmp_path / "work", as_a_person=False)
    bare = tmp_path / "private.git"
    git("clone", "-q", "--bare", str(work), str(bare))
    token = uuid.uuid4().hex
    monkeypatch.setenv(TOKEN_ENV, token)
    yield private_git_url(bare, token), token


def url_sandbox(engine: LocalEngine, url: str, credential_env: str) -> tuple[str, str]:
    name = f"gitgw-{uuid.uuid4().hex[:8]}"
    engine.get_or_create(
        name,
        timeout_seconds=120,
        egress=[],
        origin={
            "path": "",
            "branch": BRANCH,
            "run_id": RUN,
            "url": url,
            "credential_env": credential_env,
        },
    )
    remote = asyncio.run(LocalProvider(engine).git_remote(name))
    assert remote is not None and remote.endswith("/private.git")
    return name, remote


def test_a_url_origin_is_reached_with_the_workers_credential_the_sandbox_never_sees(
    engine: LocalEngine, private_origin: tuple[str, str]
) -> None:
    url, token = private_origin
    sid, remote = url_sandbox(engine, url, TOKEN_ENV)
    done = engine.run(sid, f"git clone -q {remote} /workspace/app", timeout_seconds=60)
    assert done.exit_code == 0, done.stderr
    code, said = sh(
        engine,
        sid,
        "echo work > work.txt && git add work.txt && git commit -qm work && "
        f"git push -q origin HEAD:refs/heads/{BRANCH} && env && cat .git/config",
    )
    assert code == 0, said
    assert token not in said  # not in its environment, not in its git config
    bare = Path(urlsplit_path(url))
    assert git("--git-dir", str(bare), "show", f"{BRANCH}:work.txt") == "work"
    code, said = sh(engine, sid, "git push origin HEAD:refs/heads/main")
    assert code != 0 and "overnight: this run may push only" in said, said


def test_without_the_workers_credential_the_private_origin_is_refused(
    engine: LocalEngine, private_origin: tuple[str, str]
) -> None:
    url, _ = private_origin
    sid, remote = url_sandbox(engine, url, "")
    done = engine.run(
        sid, f"GIT_TERMINAL_PROMPT=0 git clone -q {remote} /workspace/app", timeout_seconds=60
    )
    assert done.exit_code != 0


def urlsplit_path(url: str) -> str:
    """The bare repository a private_git_url serves (its registry is the fake's)."""
    from fakes.git_http import _repos

    token = url.split("/")[3]
    return str(_repos[token])
