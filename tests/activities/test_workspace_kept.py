"""Keeping the workspace, on the local provider: the `keep_workspace` activity commits what the
agent left (committed or not, `.gitignore` honoured) to a private ref of a real bare origin
without touching the agent's index, HEAD or branch, and a fresh sandbox's create puts it back.
A hostile workspace (its hooks, a symlink out, a broken index, a huge file) does no harm."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from activities.models import CreateSandboxInput
from activities.models.workspace import KeepWorkspaceInput, WorkspaceKeep, WorkspaceRestore
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.sandbox.activities import SandboxActivities
from activities.sandbox_base.setup import APP_DIR
from activities.workspace.activities import WorkspaceActivities
from overnight.core.models import RunSpec
from tests.activities.test_activities import git
from tests.live import granted

AGENT = "import time\ntime.sleep(60)\n"
# What of the agent's git a keep must leave as it was: HEAD, the status, the index's bytes.
AGENTS_GIT = "git rev-parse HEAD; git status --porcelain -z; sha1sum .git/index"


@pytest.fixture
def engine(tmp_path: Path) -> LocalEngine:
    return LocalEngine(tmp_path / "home")


@pytest.fixture
async def acts(engine: LocalEngine) -> AsyncIterator[SandboxActivities]:
    activities = SandboxActivities(
        providers={"local": LocalProvider(engine)}, grants=granted(allow_unisolated=True)
    )
    async with activities:
        yield activities
    for meta in engine.list_sandboxes():
        engine.stop(meta.id)


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    """A bare origin with one commit on main (a tracked file and a .gitignore)."""
    work, bare = tmp_path / "work", tmp_path / "origin.git"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "README").write_text("hello\n")
    (work / ".gitignore").write_text("build/\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "first")
    git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    for path in [tmp_path, bare, *bare.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)  # the sandbox's user pushes to it
    return bare


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    path = tmp_path / "agent"
    path.mkdir()
    (path / "main.py").write_text(AGENT)
    return path


def spec(origin: Path, agent_dir: Path, **fields: Any) -> RunSpec:
    return RunSpec(
        run_id=f"keep-{uuid.uuid4().hex[:8]}",
        repo=str(origin),
        binds=[{"path": str(origin.parent), "writable": True}],
        agent_dir=str(agent_dir),
        command="python3 /workspace/agent/main.py",
        keep_workspace=True,
        **fields,
    )


async def create(
    acts: SandboxActivities, run: RunSpec, attempt: int, restore: WorkspaceRestore | None = None
) -> Any:
    given = CreateSandboxInput(spec=run, attempt=attempt, checkpoint='{"step": 1}')
    given.workspace = restore
    return await ActivityEnvironment().run(acts.create_sandbox, given)


async def sh(engine: LocalEngine, sid: str, command: str) -> str:
    ran = await LocalProvider(engine).run(sid, command, cwd=APP_DIR, timeout_seconds=60)
    assert ran.exit_code == 0, ran.stderr
    return ran.stdout


async def keep(
    engine: LocalEngine, run: RunSpec, sid: str, number: int, **fields: Any
) -> WorkspaceKeep:
    kept = WorkspaceActivities(lambda _name: _provider(engine))
    values: dict[str, Any] = {
        "provider": "local",
        "sandbox_id": sid,
        "run_id": run.run_id,
        "repo": run.repo,
        "number": number,
        "at": datetime(2026, 12, 2, tzinfo=UTC),
        "max_bytes": run.max_workspace_mib * 1024 * 1024,
        "checkpoint_path": run.checkpoint_path,
        "max_checkpoint_bytes": run.max_checkpoint_bytes,
    }
    return await ActivityEnvironment().run(
        kept.keep_workspace, KeepWorkspaceInput(**(values | fields))
    )


async def _provider(engine: LocalEngine) -> LocalProvider:
    return LocalProvider(engine)


def in_origin(origin: Path, *args: str) -> str:
    return git(origin, *args)


async def test_uncommitted_files_are_kept_on_a_ref_and_the_agents_git_is_untouched(
    acts: SandboxActivities, engine: LocalEngine, origin: Path, agent_dir: Path
) -> None:
    run = spec(origin, agent_dir)
    started = await create(acts, run, 1)
    sid = started.sandbox_id
    assert started.workspace_base == in_origin(origin, "rev-parse", "main")
    # The agent: one commit of its own (not pushed), a staged file, an untracked file, an
    # edit, an ignored build folder, a file named oddly.
    await sh(
        engine,
        sid,
        "git -c user.name=a -c user.email=a@b commit -q --allow-empty -m mine && "
        "echo staged > staged.txt && git add staged.txt && echo new > new.txt && "
        "echo edited >> README && mkdir -p build && echo junk > build/out && "
        "printf x > 'odd name\n.txt'",
    )
    before = await sh(engine, sid, AGENTS_GIT)

    kept = await keep(engine, run, sid, 1)

    assert kept.outcome == "pushed", kept.detail
    assert kept.ref == f"refs/overnight/{run.run_id}/1" and kept.has_checkpoint
    assert in_origin(origin, "rev-parse", kept.ref) == kept.commit
    files = in_origin(origin, "ls-tree", "-r", "--name-only", kept.ref).splitlines()
    assert {"README", "new.txt", "staged.txt", ".gitignore"} <= set(files)
    assert not any(name.startswith("build/") for name in files)
    assert in_origin(origin, "show", f"{kept.ref}:new.txt") == "new"
    # Its first parent is the agent's own commit (pushed with it), its second the checkpoint.
    head = (await sh(engine, sid, "git rev-parse HEAD")).strip()
    assert in_origin(origin, "rev-parse", f"{kept.ref}^1") == head
    assert in_origin(origin, "show", f"{kept.ref}^2:checkpoint.json") == '{"step": 1}'
    # Nothing of the agent's moved: HEAD, the status, the index byte for byte.
    after = await sh(engine, sid, AGENTS_GIT)
    assert after == before
    assert in_origin(origin, "branch", "--list").strip() == "* main"  # no branch pushed

    # A fresh sandbox from it: the agent's commit on its branch, its files as it left them.
    again = await create(acts, run, 2, WorkspaceRestore(ref=kept.ref, commit=kept.commit))
    assert again.workspace_restored.status == "restored", again.workspace_restored
    sid2 = again.sandbox_id
    assert (await sh(engine, sid2, "git rev-parse HEAD")).strip() == head
    assert (await sh(engine, sid2, "cat new.txt staged.txt; tail -n1 README")) == (
        "new\nstaged\nedited\n"
    )
    status = await sh(engine, sid2, "git status --porcelain")
    assert "?? new.txt" in status and " M README" in status
    assert (await sh(engine, sid2, "git branch --show-current")).strip() == run.branch
    # A retried create does not put it back over the agent's work.
    await sh(engine, sid2, "echo later > new.txt")
    retried = await create(acts, run, 2, WorkspaceRestore(ref=kept.ref, commit=kept.commit))
    assert retried.workspace_restored.status == "restored"
    assert (await sh(engine, sid2, "cat new.txt")) == "later\n"


async def test_a_rewind_restores_the_checkpoint_kept_with_the_workspace(
    acts: SandboxActivities, engine: LocalEngine, origin: Path, agent_dir: Path
) -> None:
    run = spec(origin, agent_dir)
    sid = (await create(acts, run, 1)).sandbox_id
    await sh(engine, sid, "echo one > work.txt")
    await sh(engine, sid, "head -c 200000 /dev/urandom > big.bin")
    first = await keep(engine, run, sid, 1)
    await sh(engine, sid, "echo two > work.txt; echo '{\"step\": 2}' > /workspace/checkpoint.json")
    second = await keep(engine, run, sid, 2, previous=first.commit)
    assert second.outcome == "pushed" and second.commit != first.commit
    # What the first keep pushed (big.bin) is not counted again.
    assert first.bytes > 200000 > second.bytes

    back = WorkspaceRestore(ref=first.ref or "", commit=first.commit or "", rewind=True)
    again = await create(acts, run, 2, back)
    assert again.workspace_restored.checkpoint_written
    assert again.checkpoint_restored.text == '{"step": 1}'
    assert (await sh(engine, again.sandbox_id, "cat work.txt")) == "one\n"


async def test_a_workspace_over_the_limit_is_not_pushed(
    acts: SandboxActivities, engine: LocalEngine, origin: Path, agent_dir: Path
) -> None:
    run = spec(origin, agent_dir, max_workspace_mib=1)
    sid = (await create(acts, run, 1)).sandbox_id
    await sh(engine, sid, "head -c 3000000 /dev/urandom > big.bin")
    kept = await keep(engine, run, sid, 1)
    assert kept.outcome == "over_limit"
    assert "over max_workspace_mib" in kept.detail
    assert in_origin(origin, "for-each-ref", "refs/overnight") == ""
    # Nor was the big file hashed into the agent's repository.
    hashed = "git cat-file -e $(git hash-object big.bin) 2>/dev/null || echo no"
    assert (await sh(engine, sid, hashed)) == "no\n"


async def test_a_hostile_workspace_runs_no_hook_and_keeps_a_symlink_as_a_link(
    acts: SandboxActivities, engine: LocalEngine, origin: Path, agent_dir: Path, tmp_path: Path
) -> None:
    run = spec(origin, agent_dir)
    sid = (await create(acts, run, 1)).sandbox_id
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    hooks = "pre-push post-commit reference-transaction pre-commit post-index-change"
    await sh(
        engine,
        sid,
        f"for h in {hooks}; do printf '#!/bin/sh\\ntouch /workspace/hook-ran-$h\\n' "
        f"> .git/hooks/$h; chmod +x .git/hooks/$h; done; "
        f"git config core.fsmonitor 'touch /workspace/fsmonitor-ran; false'; "
        f"ln -s {victim} out; ln -s /etc/passwd passwd; printf garbage > .git/index",
    )
    kept = await keep(engine, run, sid, 1)
    assert kept.outcome == "pushed", kept.detail
    ran = await sh(engine, sid, "ls /workspace")
    assert "hook-ran" not in ran and "fsmonitor-ran" not in ran
    # The links are kept as links (their targets' bytes are not read), the victim untouched.
    assert in_origin(origin, "cat-file", "-p", f"{kept.ref}:out") == str(victim)
    mode = in_origin(origin, "ls-tree", kept.ref or "", "passwd").split()[0]
    assert mode == "120000"
    assert victim.read_text() == "untouched\n"
    # The agent's broken index is still its own, as it left it.
    assert (await sh(engine, sid, "cat .git/index")) == "garbage"


def test_the_git_used_here_knows_what_the_scripts_ask() -> None:
    version = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("git version 2.")
