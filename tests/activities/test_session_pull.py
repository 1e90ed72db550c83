"""A coding agent's session file carried out of a Runtime sandbox (issue #47, item 6): whatever
paths its checkpoints name, the observe and read-checkpoint activities never fail on them
(a failure is logged, the checkpoint still read), and the worker's store keeps only the bytes
the checkpoint's digest vouches for, and (item 1) at most `MAX_STORE_BYTES` however many paths
they name. The real withruntime SDK against the fake Runtime API."""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities.coding_agent import sessions as coding_agent_sessions
from activities.coding_agent.sessions import PULLED_INDEX
from activities.coding_agent.setup import RUNTIME_SESSION_STORE, session_store
from activities.models import ObserveInput, ReadCheckpointInput
from activities.providers.protocol import AgentLaunch, SandboxProvider
from activities.sandbox.activities import SandboxActivities
from tests.live import granted
from tests.providers.runtime_factory import runtime_harness
from tests.providers.test_behaviour import request

CHECKPOINT = "/workspace/checkpoint.json"


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[SandboxProvider]:
    async with runtime_harness(tmp_path / "fake-home") as harness:
        try:
            yield harness.provider
        finally:
            for info in await harness.provider.list({}, include_stopped=False):
                await harness.provider.stop(info.sandbox_id)


@pytest.fixture
async def acts(runtime: SandboxProvider) -> AsyncIterator[SandboxActivities]:
    async with SandboxActivities(providers={"runtime": runtime}, grants=granted()) as made:
        yield made


def checkpoint_naming(path: str, data: bytes, step: int) -> bytes:
    named = {"path": path, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return json.dumps({"step": step, "coding_agent": {"session_file": named}}).encode()


class Run:
    """A run's sandbox on the fake Runtime, whose agent writes session files and checkpoints."""

    def __init__(self, provider: SandboxProvider, acts: SandboxActivities, sandbox_id: str):
        self.provider, self.acts, self.sandbox_id = provider, acts, sandbox_id
        self.run_id = f"pull-{uuid.uuid4().hex[:8]}"
        self.store = session_store(self.run_id)
        self.step = 0

    async def agent_writes(self, path: str, vouched: bytes, after: bytes = b"") -> None:
        """The session file at `path` (only `vouched` named by the checkpoint, `after` appended
        since), the path's other shape (file or folder) removed first."""
        self.step += 1
        full = f"{RUNTIME_SESSION_STORE}/{path}"
        await self.provider.run(self.sandbox_id, f"rm -rf {RUNTIME_SESSION_STORE}")
        await self.provider.write_file(self.sandbox_id, full, vouched + after)
        await self.provider.write_file(
            self.sandbox_id, CHECKPOINT, checkpoint_naming(path, vouched, self.step)
        )

    async def read_checkpoint(self) -> str | None:
        given = ReadCheckpointInput(
            provider="runtime",
            sandbox_id=self.sandbox_id,
            checkpoint_path=CHECKPOINT,
            max_bytes=262144,
            session_store_of=self.run_id,
        )
        read = await ActivityEnvironment().run(self.acts.read_checkpoint, given)
        assert read.status == "ok", read
        return read.text

    async def observe(self, process_id: str) -> str | None:
        given = ObserveInput(
            provider="runtime",
            sandbox_id=self.sandbox_id,
            process_id=process_id,
            checkpoint_path=CHECKPOINT,
            max_checkpoint_bytes=262144,
            wait_seconds=5,
            session_store_of=self.run_id,
        )
        seen = await ActivityEnvironment().run(self.acts.observe_agent, given)
        assert seen.checkpoint is not None, seen
        return seen.checkpoint.text


@pytest.fixture
async def run(runtime: SandboxProvider, acts: SandboxActivities) -> Run:
    info, _ = await runtime.get_or_create(request())
    return Run(runtime, acts, info.sandbox_id)


async def test_the_store_keeps_only_the_bytes_the_checkpoint_vouches_for(run: Run) -> None:
    vouched = b'{"turn": 1}\n'
    unvouched = b'{"turn": 2, "written after the checkpoint": true}\n' * 100
    await run.agent_writes("projects/s.jsonl", vouched, unvouched)
    await run.read_checkpoint()
    assert (run.store / "projects/s.jsonl").read_bytes() == vouched
    index = json.loads((run.store / PULLED_INDEX).read_text())
    assert index == {"projects/s.jsonl": hashlib.sha256(vouched).hexdigest()}


async def test_a_file_and_then_a_folder_of_its_name_fail_neither_activity(
    run: Run, caplog: pytest.LogCaptureFixture
) -> None:
    """`s`, then `s/x` (the store holds a file where a folder is wanted), then `t/x`, then `t`
    (a folder where a file is wanted): each read goes on, its checkpoint read, and says why
    the session was not copied."""
    first = b"first session\n"
    await run.agent_writes("s", first)
    assert json.loads(await run.read_checkpoint() or "")["step"] == 1
    caplog.set_level(logging.WARNING)

    await run.agent_writes("s/x", b"second\n")
    assert json.loads(await run.read_checkpoint() or "")["step"] == 2
    assert (run.store / "s").read_bytes() == first  # the copy it had is kept

    await run.agent_writes("t/x", b"third\n")
    await run.read_checkpoint()
    assert (run.store / "t/x").read_bytes() == b"third\n"
    await run.agent_writes("t", b"fourth\n")
    assert json.loads(await run.read_checkpoint() or "")["step"] == 4
    assert (run.store / "t/x").read_bytes() == b"third\n"

    said = [r.getMessage() for r in caplog.records if "not copied" in r.getMessage()]
    assert len(said) == 2 and "session file s/x" in said[0] and "session file t " in said[1]

    # The observe activity carries it out the same way, on the same worker code path.
    agent = await run.provider.start_agent(
        run.sandbox_id,
        AgentLaunch(start_key="pull-1-0", command="sleep 60", cwd="/workspace"),
    )
    await run.agent_writes("s/y", b"fifth\n")
    assert json.loads(await run.observe(agent.process_id) or "")["step"] == 5
    assert (run.store / "s").read_bytes() == first
    assert sum("session file s/y" in r.getMessage() for r in caplog.records) == 1


async def test_a_checkpoint_nested_past_the_stacks_depth_fails_no_read(run: Run) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000  # within the 256 KiB a checkpoint may hold
    await run.provider.write_file(run.sandbox_id, CHECKPOINT, deep)
    assert await run.read_checkpoint() == deep.decode()
    assert not run.store.exists()


async def test_the_store_holds_at_most_its_cap_however_many_paths_are_named(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent naming a new session file at each checkpoint cannot grow the worker's copy
    past its cap: the oldest files pulled make room (the session resumed is the latest)."""
    monkeypatch.setattr(coding_agent_sessions, "MAX_STORE_BYTES", 1000)
    for step, path in enumerate(("a.jsonl", "b/one.jsonl", "b/two.jsonl")):
        await run.agent_writes(path, bytes([65 + step]) * 600)
        await run.read_checkpoint()

    held = sorted(str(p.relative_to(run.store)) for p in run.store.rglob("*") if p.is_file())
    assert held == [PULLED_INDEX, "b/two.jsonl"]
    assert list(json.loads((run.store / PULLED_INDEX).read_text())) == ["b/two.jsonl"]
