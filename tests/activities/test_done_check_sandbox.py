"""The done check's own sandbox on real local sandboxes (bubblewrap here): the agent's work is
pushed to the run's check ref and confirmed on the origin, and a fresh sandbox of the run
(`{run_id}-check-<n>`, labelled) holds a clean clone of the run's branch at that commit and
nothing else the agent left: not its `HOME`, its `/tmp`, its ignored files or its processes.
Work that cannot be pushed is said (and told to the agent), and no sandbox is made for it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from activities.delivery.done_checks import DoneCheckActivities
from activities.delivery.done_sandbox import DoneSandboxActivities
from activities.models import CreateSandboxInput, RunDoneCheckInput
from activities.models.done_sandbox import DoneCheckSandbox, PrepareDoneCheckInput
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import SandboxProvider
from activities.sandbox.activities import SandboxActivities
from activities.sandbox_base.setup import APP_DIR
from overnight.core.constants import LABEL_CHECK, LABEL_RUN
from overnight.core.done_check import DONE_CHECK_FILE
from overnight.core.models import RunSpec
from tests.activities.test_activities import git
from tests.activities.test_workspace_kept import agent_dir, origin  # noqa: F401 (fixtures)
from tests.live import granted

# The agent's leftovers outside the clone, and an ignored file in it.
LEFTOVERS = (
    "mkdir -p build && echo built > build/out && echo mine > work.txt && "
    "echo home > $HOME/left.txt && echo tmp > /tmp/left.txt && "
    "(setsid sleep 300 >/dev/null 2>&1 &)"
)
# What the check sandbox holds, said in one line each.
LOOK = (
    "git rev-parse HEAD; git rev-parse --abbrev-ref HEAD; git status --porcelain | wc -l; "
    "cat work.txt; ls build 2>&1 | head -1; cat $HOME/left.txt /tmp/left.txt 2>/dev/null | wc -l; "
    "pgrep -c sleep || true"
)


@pytest.fixture
def engine(tmp_path: Path) -> LocalEngine:
    return LocalEngine(tmp_path / "home")


@pytest.fixture
async def acts(engine: LocalEngine) -> AsyncIterator[SandboxActivities]:
    async with SandboxActivities(providers={"local": LocalProvider(engine)}, grants=granted()) as a:
        yield a
    for meta in engine.list_sandboxes():
        engine.stop(meta.id)


def spec_for(origin: Path, agent_dir: Path, **fields: Any) -> RunSpec:  # noqa: F811
    return RunSpec(
        run_id=f"fresh-{uuid.uuid4().hex[:8]}",
        repo=str(origin),
        binds=[{"path": str(origin.parent), "writable": True}],
        agent_dir=str(agent_dir),
        command="python3 /workspace/agent/main.py",
        done_when=["test -f work.txt"],
        **fields,
    )


def prepare_input(run: RunSpec, sid: str, number: int = 1) -> PrepareDoneCheckInput:
    return PrepareDoneCheckInput(
        spec=run,
        agent_sandbox_id=sid,
        number=number,
        round=number,
        at=datetime(2026, 12, 6, tzinfo=UTC),
        timeout_seconds=600,
    )


def preparer(engine: LocalEngine) -> DoneSandboxActivities:
    async def provider(_name: str) -> SandboxProvider:
        return LocalProvider(engine)

    return DoneSandboxActivities(provider, grants=granted())


async def agent_sandbox(acts: SandboxActivities, engine: LocalEngine, run: RunSpec) -> str:
    made = CreateSandboxInput(spec=run, attempt=1, checkpoint='{"step": 1}')
    sid: str = (await ActivityEnvironment().run(acts.create_sandbox, made)).sandbox_id
    ran = await LocalProvider(engine).run(sid, LEFTOVERS, cwd=APP_DIR, timeout_seconds=60)
    assert ran.exit_code == 0, ran.stderr
    return sid


async def prepare(engine: LocalEngine, given: PrepareDoneCheckInput) -> DoneCheckSandbox:
    return await ActivityEnvironment().run(preparer(engine).prepare_done_check, given)


async def test_the_check_sandbox_holds_a_clean_clone_at_the_pushed_commit_and_nothing_else(
    acts: SandboxActivities,
    engine: LocalEngine,
    origin: Path,  # noqa: F811
    agent_dir: Path,  # noqa: F811
) -> None:
    run = spec_for(origin, agent_dir)
    sid = await agent_sandbox(acts, engine, run)

    made = await prepare(engine, prepare_input(run, sid))

    # The commit the origin holds at the run's check ref, as the worker saw it there.
    ref = f"refs/overnight/{run.run_id}/check-1"
    assert made.problem == "" and made.ref == ref
    assert made.commit == git(origin, "rev-parse", ref)
    assert made.sandbox_id == f"{run.run_id}-check-1"
    box = LocalProvider(engine)
    info = await box.sandbox(made.sandbox_id)
    assert info.state == "running"
    assert (info.labels[LABEL_RUN], info.labels[LABEL_CHECK]) == (run.run_id, "1")
    # A clean clone of the run's branch at that commit: the agent's uncommitted work is in
    # it, its ignored files, its HOME and /tmp and its leftover process are not.
    seen = await box.run(made.sandbox_id, LOOK, cwd=APP_DIR, timeout_seconds=60)
    assert seen.stdout.split("\n") == [
        made.commit,
        run.branch,
        "0",
        "mine",
        "ls: cannot access 'build': No such file or directory",
        "0",
        "0",
        "",
    ], seen.stderr
    # Nothing else of the agent's sandbox is in /workspace.
    listed = await box.run(made.sandbox_id, "ls -A /workspace", timeout_seconds=30)
    assert listed.stdout.split() == ["app"]

    # Made again (a retried step): the same sandbox, the same commit.
    again = await prepare(engine, prepare_input(run, sid))
    assert (again.sandbox_id, again.commit) == (made.sandbox_id, made.commit)


async def test_a_failed_check_in_the_check_sandbox_is_told_to_the_agent_in_its_own(
    acts: SandboxActivities,
    engine: LocalEngine,
    origin: Path,  # noqa: F811
    agent_dir: Path,  # noqa: F811
) -> None:
    run = spec_for(origin, agent_dir)
    sid = await agent_sandbox(acts, engine, run)
    made = await prepare(engine, prepare_input(run, sid))
    assert made.sandbox_id is not None

    checked = await ActivityEnvironment().run(
        acts_checks(engine).run_done_check,
        RunDoneCheckInput(
            provider="local",
            sandbox_id=made.sandbox_id,
            command="true",
            index=0,
            round=1,
            cwd="/workspace/app/missing",  # made by the agent, never committed
            timeout_seconds=30,
            tell_sandbox_id=sid,
            commit=made.commit,
        ),
    )

    # Its cwd is not in the clone: failed, saying so, and the agent finds it in its sandbox.
    assert (checked.passed, checked.exit_code, checked.commit) == (False, 1, made.commit)
    assert "/workspace/app/missing" in checked.tail
    told = engine.host_path(sid, DONE_CHECK_FILE).read_text()
    assert "command: true" in told and "result: exit 1" in told
    assert not engine.host_path(made.sandbox_id, DONE_CHECK_FILE).exists()


async def test_work_the_origin_refuses_is_not_checked_and_the_agent_is_told(
    acts: SandboxActivities,
    engine: LocalEngine,
    origin: Path,  # noqa: F811
    agent_dir: Path,  # noqa: F811
) -> None:
    run = spec_for(origin, agent_dir)
    sid = await agent_sandbox(acts, engine, run)
    for path in [origin, *origin.rglob("*")]:  # the origin now refuses every push
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        made = await prepare(engine, prepare_input(run, sid))
    finally:
        for path in [origin, *origin.rglob("*")]:
            path.chmod(0o777 if path.is_dir() else 0o666)

    assert made.sandbox_id is None and made.commit is None
    assert made.problem.startswith("the work was not checked: it could not be pushed: "), made
    assert [meta.id for meta in engine.list_sandboxes({LABEL_RUN: run.run_id})] == [sid]
    told = engine.host_path(sid, DONE_CHECK_FILE).read_text()
    assert "command: test -f work.txt" in told and made.problem in told


async def test_work_over_max_workspace_mib_is_not_checked(
    acts: SandboxActivities,
    engine: LocalEngine,
    origin: Path,  # noqa: F811
    agent_dir: Path,  # noqa: F811
) -> None:
    run = spec_for(origin, agent_dir, max_workspace_mib=1)
    sid = await agent_sandbox(acts, engine, run)
    big = "head -c 2000000 /dev/urandom > big.bin"
    assert (await LocalProvider(engine).run(sid, big, cwd=APP_DIR)).exit_code == 0

    made = await prepare(engine, prepare_input(run, sid))

    assert made.sandbox_id is None
    assert "over max_workspace_mib (1.0 MiB)" in made.problem, made.problem


def acts_checks(engine: LocalEngine) -> DoneCheckActivities:
    async def provider(_name: str) -> SandboxProvider:
        return LocalProvider(engine)

    return DoneCheckActivities(provider)
