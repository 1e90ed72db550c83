"""A finished run's push to its branch (`confirm_pushed`) on real local sandboxes (bubblewrap
here) and a real bare origin: the branch holds the agent's HEAD when it left nothing
uncommitted, else a commit on top holding the rest; the origin, asked by the worker, holds
exactly that commit; a retry makes the same commit; an origin that refuses is said in git's
words, retried, then final (`PushRefused`); the branch is never forced back."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.delivery.branch_push import (
    PUSH_FAILED,
    PUSH_REFUSED,
    REFUSAL_TRIES,
    BranchPushActivities,
)
from activities.models import CreateSandboxInput
from activities.models.delivery import BranchPushed, ConfirmPushedInput
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import SandboxProvider
from activities.sandbox.activities import SandboxActivities
from activities.sandbox_base.setup import APP_DIR
from overnight.core.models import RunSpec
from tests.activities.test_activities import git
from tests.activities.test_workspace_kept import agent_dir, origin  # noqa: F401 (fixtures)
from tests.live import granted

AT = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
COMMIT_ALL = "git add -A && git -c user.name=a -c user.email=a@b commit -qm 'the agent: done'"


@pytest.fixture
def engine(tmp_path: Path) -> LocalEngine:
    return LocalEngine(tmp_path / "home")


@pytest.fixture
async def acts(engine: LocalEngine) -> AsyncIterator[SandboxActivities]:
    async with SandboxActivities(providers={"local": LocalProvider(engine)}, grants=granted()) as a:
        yield a
    for meta in engine.list_sandboxes():
        engine.stop(meta.id)


def spec_for(origin: Path, agent_dir: Path) -> RunSpec:  # noqa: F811
    return RunSpec(
        run_id=f"branch-{uuid.uuid4().hex[:8]}",
        repo=str(origin),
        binds=[{"path": str(origin.parent), "writable": True}],
        agent_dir=str(agent_dir),
        command="python3 /workspace/agent/main.py",
    )


async def sandbox_with(
    acts: SandboxActivities, engine: LocalEngine, run: RunSpec, work: str
) -> str:
    made = CreateSandboxInput(spec=run, attempt=1, checkpoint='{"step": 1}')
    sid: str = (await ActivityEnvironment().run(acts.create_sandbox, made)).sandbox_id
    ran = await LocalProvider(engine).run(sid, work, cwd=APP_DIR, timeout_seconds=60)
    assert ran.exit_code == 0, ran.stderr
    return sid


async def push(engine: LocalEngine, run: RunSpec, sid: str, attempt: int = 1) -> BranchPushed:
    async def provider(_name: str) -> SandboxProvider:
        return LocalProvider(engine)

    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, attempt=attempt)
    given = ConfirmPushedInput(spec=run, sandbox_id=sid, at=AT)
    return await env.run(BranchPushActivities(provider).confirm_pushed, given)


async def head_of(engine: LocalEngine, sid: str) -> str:
    ran = await LocalProvider(engine).run(
        sid, "git rev-parse HEAD", cwd=APP_DIR, timeout_seconds=30
    )
    return ran.stdout.strip()


def read_only(origin: Path, writable: bool = False) -> None:  # noqa: F811
    for path in [origin, *origin.rglob("*")]:
        if path.is_dir():
            path.chmod(0o777 if writable else 0o555)


async def test_work_left_uncommitted_is_pushed_on_top_of_the_agents_head(
    acts: SandboxActivities,
    engine: LocalEngine,
    origin: Path,  # noqa: F811
    agent_dir: Path,  # noqa: F811
) -> None:
    run = spec_for(origin, agent_dir)
    sid = await sandbox_with(
        acts, engine, run, f"{COMMIT_ALL} --allow-empty && echo more > left.txt"
    )
    head = await head_of(engine, sid)

    pushed = await push(engine, run, sid)

    ref = f"refs/heads/{run.branch}"
    assert pushed.ref == ref and pushed.commit == git(origin, "rev-parse", ref)
    assert pushed.commit != head
    # Its one parent is the agent's HEAD (no checkpoint parent), its tree the workspace.
    assert git(origin, "rev-list", "--parents", "-n", "1", pushed.commit).split() == [
        pushed.commit,
        head,
    ]
    assert git(origin, "show", f"{pushed.commit}:left.txt") == "more"
    # The agent's own HEAD and index are as it left them; a retry makes the same commit.
    assert await head_of(engine, sid) == head
    assert (await push(engine, run, sid)).commit == pushed.commit


async def test_work_all_committed_is_the_agents_head_itself(
    acts: SandboxActivities,
    engine: LocalEngine,
    origin: Path,  # noqa: F811
    agent_dir: Path,  # noqa: F811
) -> None:
    run = spec_for(origin, agent_dir)
    sid = await sandbox_with(acts, engine, run, f"echo done > done.txt && {COMMIT_ALL}")

    pushed = await push(engine, run, sid)

    assert pushed.commit == await head_of(engine, sid)
    assert git(origin, "rev-parse", f"refs/heads/{run.branch}") == pushed.commit


async def test_an_origin_that_refuses_is_said_in_gits_words_retried_then_final(
    acts: SandboxActivities,
    engine: LocalEngine,
    origin: Path,  # noqa: F811
    agent_dir: Path,  # noqa: F811
) -> None:
    run = spec_for(origin, agent_dir)
    sid = await sandbox_with(acts, engine, run, "echo work > work.txt")
    read_only(origin)
    try:
        with pytest.raises(ApplicationError) as first:
            await push(engine, run, sid)
        with pytest.raises(ApplicationError) as last:
            await push(engine, run, sid, attempt=REFUSAL_TRIES)
    finally:
        read_only(origin, writable=True)

    assert (first.value.type, first.value.non_retryable) == (PUSH_FAILED, False)
    assert (last.value.type, last.value.non_retryable) == (PUSH_REFUSED, True)
    said = last.value.message
    assert said.startswith("the origin refused the push: ")
    assert "unable to create temporary object directory" in said and "remote rejected" in said
    assert git(origin, "branch", "--list", run.branch) == ""
    # Writable again: the same work lands.
    pushed = await push(engine, run, sid, attempt=REFUSAL_TRIES + 1)
    assert git(origin, "rev-parse", f"refs/heads/{run.branch}") == pushed.commit


async def test_a_branch_moved_elsewhere_on_the_origin_is_refused_never_forced(
    acts: SandboxActivities,
    engine: LocalEngine,
    origin: Path,  # noqa: F811
    agent_dir: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    run = spec_for(origin, agent_dir)
    sid = await sandbox_with(acts, engine, run, "echo work > work.txt")
    # A person pushes a commit of their own to the run's branch meanwhile.
    other = tmp_path / "person"
    git(tmp_path, "clone", "-q", str(origin), str(other))
    git(other, "commit", "-q", "--allow-empty", "-m", "a person's commit")
    git(other, "push", "-q", "origin", f"HEAD:refs/heads/{run.branch}")
    theirs = git(origin, "rev-parse", f"refs/heads/{run.branch}")

    with pytest.raises(ApplicationError) as refused:
        await push(engine, run, sid, attempt=REFUSAL_TRIES)

    assert refused.value.type == PUSH_REFUSED
    assert refused.value.message.startswith("the origin refused the push: ")
    assert "rejected" in refused.value.message
    assert git(origin, "rev-parse", f"refs/heads/{run.branch}") == theirs
