"""The sandbox activities in `ActivityEnvironment`, on the local provider: real git repos, real
agent processes, real files."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import ActivityEnvironment

from activities.errors import activity_errors, to_application_error
from activities.models import (
    CreateSandboxInput,
    ExtendSandboxInput,
    ListSandboxesInput,
    ObserveInput,
    ReadCheckpointInput,
    SandboxRef,
    SearchAttributeCheckInput,
    StartAgentInput,
)
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import ProviderError, SandboxNotFound
from activities.providers.registry import PROVIDERS
from activities.sandbox.activities import SandboxActivities
from overnight.core.constants import LABEL_ATTEMPT, LABEL_RUN, SEARCH_ATTRIBUTE_TYPES
from overnight.core.models import RunSpec
from tests.live import granted
from tests.waits import CAP
from workflows.policies import VISIBILITY_CHECK_RETRY

SECRET_NAME = "OVERNIGHT_TEST_TOKEN"
# The test agent: records its environment and each start, then does what MODE says.
AGENT = """\
import json, os, pathlib, sys, time
checkpoint = pathlib.Path(os.environ["OVERNIGHT_CHECKPOINT"])
box = checkpoint.parent
with open(box / "starts.log", "a") as log:
    log.write(os.environ["OVERNIGHT_ATTEMPT"] + "\\n")
names = [n for n in os.environ if n.startswith(("OVERNIGHT_", "MODE"))]
(box / "agent-env.json").write_text(json.dumps({n: os.environ[n] for n in names}))
mode = os.environ.get("MODE", "sleep")
if mode == "exit":
    time.sleep(0.3)
    sys.exit(0)
if mode in ("checkpoint", "own-checkpoint"):
    time.sleep(0.5 if mode == "checkpoint" else 0)
    tmp = box / "cp.tmp"
    tmp.write_text(json.dumps({"next": "step 2", "by": "agent"}))
    tmp.replace(checkpoint)
time.sleep(30)
"""


@pytest.fixture
def engine(tmp_path: Path) -> LocalEngine:
    return LocalEngine(tmp_path / "home")


@pytest.fixture
async def acts(engine: LocalEngine) -> AsyncIterator[SandboxActivities]:
    activities = SandboxActivities(
        providers={"local": LocalProvider(engine)},
        factories={"runtime": PROVIDERS["runtime"].build},
        # What these tests ask for on purpose (refusals: tests/activities/test_grants.py).
        grants=granted(secret_env=[SECRET_NAME], allow_unisolated=True),
    )
    async with activities:
        yield activities
    for meta in engine.list_sandboxes():
        engine.stop(meta.id)


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    done = subprocess.run(
        # The clone in a sandbox belongs to its user (a root worker's): git must trust it here.
        ["git", "-c", "safe.directory=*", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repo with `main` and a `feature/x` branch that has one more file."""
    path = tmp_path_factory.mktemp("repo")
    path.chmod(0o755)  # a root worker's sandboxes run as another user, who clones it
    git(path, "init", "-q", "-b", "main")
    (path / "README").write_text("hello\n")
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "first")
    git(path, "switch", "-q", "-c", "feature/x")
    (path / "feature.txt").write_text("x\n")
    git(path, "add", "feature.txt")
    git(path, "commit", "-q", "-m", "feature")
    git(path, "switch", "-q", "main")
    return path


@pytest.fixture(scope="module")
def agent_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("agent")
    (path / "main.py").write_text(AGENT)
    return path


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    value = f"s3cret-{uuid.uuid4().hex}"
    monkeypatch.setenv(SECRET_NAME, value)
    return value


def spec(repo: Path, agent_dir: Path, mode: str = "sleep", **fields: Any) -> RunSpec:
    return RunSpec(
        run_id=f"run-{uuid.uuid4().hex[:8]}",
        repo=str(repo),
        agent_dir=str(agent_dir),
        command="python3 /workspace/agent/main.py",
        env={"MODE": mode},
        **fields,
    )


async def wait_for_file(path: Path, timeout: float = CAP) -> str:
    """The file's text once it has some: the agent's write_text makes the file before it
    writes (one small write, so text read is whole)."""
    give_up = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < give_up, f"{path} never appeared, or stayed empty"
        await asyncio.sleep(0.05)
    return path.read_text()


# An observe's window: a watch that returns on news is back in moments, one that missed it only
# at the window's end; ON_NEWS (20 s) tells the two apart however loaded the machine.
WINDOW = 60
ON_NEWS = 20


def observe(started_sandbox: str, process_id: str, **fields: Any) -> ObserveInput:
    values: dict[str, Any] = {
        "provider": "local",
        "sandbox_id": started_sandbox,
        "process_id": process_id,
        "checkpoint_path": "/workspace/checkpoint.json",
        "max_checkpoint_bytes": 1000,
        "wait_seconds": WINDOW,
        "check_interval_seconds": 0.1,
    }
    return ObserveInput(**(values | fields))


# ----- create_sandbox -----


async def test_create_sandbox_clones_switches_uploads_writes_and_starts_the_agent(
    acts: SandboxActivities,
    engine: LocalEngine,
    repo: Path,
    agent_dir: Path,
    secret: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    run = spec(repo, agent_dir, secret_env=[SECRET_NAME])
    given = CreateSandboxInput(spec=run, attempt=2, checkpoint='{"step": 2}', restart_reason="x")
    started = await ActivityEnvironment().run(acts.create_sandbox, given)

    sid = f"{run.run_id}-2"
    assert (started.sandbox_id, started.process_id, started.created) == (sid, f"{sid}-0", True)
    meta = engine.get(sid)
    assert meta.labels == {LABEL_RUN: run.run_id, LABEL_ATTEMPT: "2"}
    app = engine.host_path(sid, "/workspace/app")
    assert (app / "README").read_text() == "hello\n"
    assert git(app, "branch", "--show-current") == f"agent/{run.run_id}"
    assert (engine.host_path(sid, "/workspace/agent/main.py")).read_text() == AGENT
    checkpoint = engine.host_path(sid, "/workspace/checkpoint.json")
    assert checkpoint.read_text() == '{"step": 2}'

    seen = json.loads(await wait_for_file(checkpoint.parent / "agent-env.json"))
    assert seen == {
        "OVERNIGHT_RUN_ID": run.run_id,
        "OVERNIGHT_ATTEMPT": "2",
        "OVERNIGHT_RESTART_REASON": "x",
        # The real path: the sandbox's folder is mounted at /workspace (bubblewrap).
        "OVERNIGHT_CHECKPOINT": "/workspace/checkpoint.json",
        "OVERNIGHT_FRESH_CONTEXT_EXIT_CODE": "75",
        "OVERNIGHT_RECOVERY": "checkpoint",
        "OVERNIGHT_TEST_TOKEN": secret,
        "MODE": "sleep",
    }
    # The secret reached the agent and nothing else: no result, no log, no state file.
    assert secret not in started.model_dump_json()
    assert secret not in caplog.text
    state_files = [p for p in engine.folder(sid).rglob("*") if p.is_file()]
    leaks = [p for p in state_files if secret.encode() in p.read_bytes()]
    assert leaks == [checkpoint.parent / "agent-env.json"]


async def test_create_sandbox_tracks_the_branch_origin_already_has(
    acts: SandboxActivities, engine: LocalEngine, repo: Path, agent_dir: Path
) -> None:
    run = spec(repo, agent_dir, branch="feature/x")
    started = await ActivityEnvironment().run(
        acts.create_sandbox, CreateSandboxInput(spec=run, attempt=1)
    )
    app = engine.host_path(started.sandbox_id, "/workspace/app")
    assert git(app, "rev-parse", "--abbrev-ref", "@{upstream}") == "origin/feature/x"
    assert (app / "feature.txt").exists()
    assert not engine.host_path(started.sandbox_id, "/workspace/checkpoint.json").exists()


async def test_a_retried_create_starts_one_agent_and_keeps_its_checkpoint(
    acts: SandboxActivities, engine: LocalEngine, repo: Path, agent_dir: Path
) -> None:
    run = spec(repo, agent_dir, mode="own-checkpoint").model_copy(
        update={"repo": repo.as_uri()}  # a file:// URL works as well as a path
    )
    given = CreateSandboxInput(spec=run, attempt=1, checkpoint="given")
    first = await ActivityEnvironment().run(acts.create_sandbox, given)
    checkpoint = engine.host_path(first.sandbox_id, "/workspace/checkpoint.json")
    give_up = time.monotonic() + CAP
    while checkpoint.read_text() == "given":
        assert time.monotonic() < give_up
        await asyncio.sleep(0.05)

    again = await ActivityEnvironment().run(acts.create_sandbox, given)

    assert (again.sandbox_id, again.process_id) == (first.sandbox_id, first.process_id)
    assert (first.created, again.created) == (True, False)
    assert "agent" in checkpoint.read_text()  # the agent's own, not overwritten by "given"
    await asyncio.sleep(0.2)
    assert (checkpoint.parent / "starts.log").read_text() == "1\n"


async def test_a_local_origin_mid_push_is_cloned_without_reading_the_pushers_quarantine(
    acts: SandboxActivities, engine: LocalEngine, tmp_path: Path, agent_dir: Path
) -> None:
    """A push into a local origin keeps its objects, until it ends, in a folder only the pusher
    may read (git's quarantine), and one killed mid-push leaves it there. A clone that copied
    the objects folder file by file met it and failed ("failed to iterate over objects/"); a
    clone through git's transport never reads it."""
    origin = tmp_path / "origin.git"
    seed = tmp_path / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    (seed / "README").write_text("hello\n")
    git(seed, "add", "README")
    git(seed, "commit", "-q", "-m", "first")
    git(tmp_path, "init", "-q", "--bare", "--shared=0777", "-b", "main", str(origin))
    git(seed, "push", "-q", str(origin), "main")
    for path in [tmp_path, *tmp_path.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    (origin / "objects" / "tmp_objdir-incoming-Xy12ab").mkdir(mode=0o700)

    run = spec(origin, agent_dir)
    started = await ActivityEnvironment().run(
        acts.create_sandbox, CreateSandboxInput(spec=run, attempt=1)
    )
    app = engine.host_path(started.sandbox_id, "/workspace/app")
    assert (app / "README").read_text() == "hello\n"


async def test_heartbeats_only_as_needed_through_a_slow_clone(
    acts: SandboxActivities,
    repo: Path,
    agent_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_git = shutil.which("git")
    slow_bin = tmp_path / "slow-bin"
    slow_bin.mkdir()
    (slow_bin / "git").write_text(
        f'#!/bin/sh\nif [ "$1" = clone ]; then sleep 3; fi\nexec {real_git} "$@"\n'
    )
    (slow_bin / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow_bin}{os.pathsep}{os.environ['PATH']}")
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=0.9))
    beats: list[float] = []
    env.on_heartbeat = lambda *details: beats.append(time.monotonic())

    began = time.monotonic()
    # Not isolated: the slow git lives in this test's /tmp, which a sandbox's /tmp hides.
    slow = spec(repo, agent_dir, isolation="none")
    await env.run(acts.create_sandbox, CreateSandboxInput(spec=slow, attempt=1))

    assert time.monotonic() - began >= 3
    # None at the start (it would carry nothing), then one per 0.72 s (0.8 x the timeout) all
    # through the clone: no silence as long as the clone's 3 s. (The beats' exact spacing is
    # tests/activities/test_heartbeat.py's; a loaded machine delays each a little.)
    assert len(beats) >= 2
    assert beats[0] - began >= 0.6
    assert max(b - a for a, b in zip([began, *beats], beats, strict=False)) < 2


async def test_start_agent_starts_a_fresh_process_in_the_same_sandbox(
    acts: SandboxActivities, engine: LocalEngine, repo: Path, agent_dir: Path
) -> None:
    run = spec(repo, agent_dir, mode="exit")
    first = await ActivityEnvironment().run(
        acts.create_sandbox, CreateSandboxInput(spec=run, attempt=1)
    )
    fresh = StartAgentInput(
        spec=run, sandbox_id=first.sandbox_id, attempt=1, fresh_start=1, restart_reason="full"
    )
    again = await ActivityEnvironment().run(acts.start_agent, fresh)
    repeated = await ActivityEnvironment().run(acts.start_agent, fresh)

    assert again.sandbox_id == first.sandbox_id
    assert again.process_id == repeated.process_id == f"{run.run_id}-1-1" != first.process_id
    starts = engine.host_path(first.sandbox_id, "/workspace/starts.log")
    await wait_for_file(starts)
    give_up = time.monotonic() + CAP
    while starts.read_text() != "1\n1\n":
        assert time.monotonic() < give_up, starts.read_text()
        await asyncio.sleep(0.05)


# ----- observe_agent and read_checkpoint -----


async def test_observe_returns_at_once_when_the_agent_exits(
    acts: SandboxActivities, repo: Path, agent_dir: Path
) -> None:
    run = spec(repo, agent_dir, mode="exit")
    started = await ActivityEnvironment().run(
        acts.create_sandbox, CreateSandboxInput(spec=run, attempt=1)
    )
    began = time.monotonic()
    seen = await ActivityEnvironment().run(
        acts.observe_agent, observe(started.sandbox_id, started.process_id)
    )
    assert time.monotonic() - began < ON_NEWS, "the exit was seen at the window's end"
    assert (seen.process_state, seen.exit_code, seen.sandbox_state) == ("exited", 0, "running")


async def test_observe_returns_at_once_when_the_checkpoint_changes(
    acts: SandboxActivities, repo: Path, agent_dir: Path
) -> None:
    run = spec(repo, agent_dir, mode="checkpoint")
    started = await ActivityEnvironment().run(
        acts.create_sandbox, CreateSandboxInput(spec=run, attempt=1)
    )
    watch = observe(started.sandbox_id, started.process_id)
    began = time.monotonic()
    seen = await ActivityEnvironment().run(acts.observe_agent, watch)
    assert time.monotonic() - began < ON_NEWS, "the checkpoint was seen at the window's end"
    assert seen.process_state == "running" and seen.checkpoint is not None
    assert seen.checkpoint.status == "ok"
    assert json.loads(seen.checkpoint.text or "") == {"next": "step 2", "by": "agent"}

    # Known now: the next look waits its time and reports no checkpoint.
    known = watch.model_copy(update={"known_digest": seen.checkpoint.digest, "wait_seconds": 0.5})
    began = time.monotonic()
    quiet = await ActivityEnvironment().run(acts.observe_agent, known)
    # Its whole 0.5 s, and over then, not at the watch's next backstop look (10 s).
    assert 0.5 <= time.monotonic() - began < 8
    assert (quiet.process_state, quiet.checkpoint) == ("running", None)


async def test_cancelling_observe_stops_it_promptly(
    acts: SandboxActivities, repo: Path, agent_dir: Path
) -> None:
    started = await ActivityEnvironment().run(
        acts.create_sandbox, CreateSandboxInput(spec=spec(repo, agent_dir), attempt=1)
    )
    env = ActivityEnvironment()
    watching = asyncio.create_task(
        env.run(acts.observe_agent, observe(started.sandbox_id, started.process_id))
    )
    await asyncio.sleep(0.5)
    assert not watching.done()
    began = time.monotonic()
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await watching
    assert time.monotonic() - began < ON_NEWS, "the cancelled watch ran to its window's end"


async def test_observe_reports_a_paused_or_stopped_sandbox_without_reading_it(
    acts: SandboxActivities, repo: Path, agent_dir: Path
) -> None:
    run = spec(repo, agent_dir, mode="checkpoint")
    started = await ActivityEnvironment().run(
        acts.create_sandbox, CreateSandboxInput(spec=run, attempt=1)
    )
    ref = SandboxRef(provider="local", sandbox_id=started.sandbox_id)
    await ActivityEnvironment().run(acts.lifecycle.pause_sandbox, ref)
    watch = observe(started.sandbox_id, started.process_id)
    paused = await ActivityEnvironment().run(acts.observe_agent, watch)
    assert (paused.sandbox_state, paused.process_state, paused.checkpoint) == (
        "paused",
        "running",
        None,
    )
    await ActivityEnvironment().run(acts.lifecycle.stop_sandbox, ref)
    stopped = await ActivityEnvironment().run(acts.observe_agent, watch)
    assert (stopped.sandbox_state, stopped.stop_reason, stopped.process_state) == (
        "stopped",
        "stopped",
        "killed",
    )
    gone = await ActivityEnvironment().run(
        acts.observe_agent, watch.model_copy(update={"sandbox_id": "no-such-sandbox"})
    )
    assert (gone.sandbox_state, gone.process_state) == ("missing", "missing")


async def test_read_checkpoint_says_what_it_found(
    acts: SandboxActivities, engine: LocalEngine
) -> None:
    engine.get_or_create("reads")
    path = engine.host_path("reads", "/workspace/checkpoint.json")
    ask = ReadCheckpointInput(
        provider="local",
        sandbox_id="reads",
        checkpoint_path="/workspace/checkpoint.json",
        max_bytes=10,
    )

    async def read(**update: Any) -> tuple[str, str | None, str | None]:
        found = await ActivityEnvironment().run(acts.read_checkpoint, ask.model_copy(update=update))
        return found.status, found.text, found.digest

    assert await read() == ("missing", None, None)
    path.write_text("hello")
    status, text, digest = await read()
    assert (status, text) == ("ok", "hello") and digest is not None
    assert await read(known_digest=digest) == ("unchanged", None, digest)
    path.write_bytes(b"\xff\xfe")
    assert (await read())[:2] == ("unreadable", None)
    path.write_text("x" * 11)
    assert await read() == ("too_large", None, "too_large:11")
    assert (await read(known_digest="too_large:11"))[0] == "unchanged"
    assert await read(sandbox_id="no-such-sandbox") == ("missing", None, None)


# ----- lifecycle -----


async def test_pause_and_stop_are_idempotent_and_a_missing_sandbox_is_no_error(
    acts: SandboxActivities, engine: LocalEngine
) -> None:
    engine.get_or_create("life")
    ref = SandboxRef(provider="local", sandbox_id="life")
    env = ActivityEnvironment()
    assert (await env.run(acts.lifecycle.pause_sandbox, ref)).state == "paused"
    assert (await env.run(acts.lifecycle.pause_sandbox, ref)).state == "paused"
    assert (await env.run(acts.lifecycle.stop_sandbox, ref)).state == "stopped"
    assert (await env.run(acts.lifecycle.stop_sandbox, ref)).state == "stopped"
    assert (await env.run(acts.lifecycle.pause_sandbox, ref)).state == "stopped"
    later = datetime.now(UTC) + timedelta(hours=2)
    extended = ExtendSandboxInput(provider="local", sandbox_id="life", until=later)
    assert (await env.run(acts.lifecycle.extend_sandbox, extended)).state == "stopped"
    gone = ref.model_copy(update={"sandbox_id": "no-such-sandbox"})
    assert (await env.run(acts.lifecycle.stop_sandbox, gone)).state == "missing"
    assert (await env.run(acts.lifecycle.pause_sandbox, gone)).state == "missing"


async def test_extend_sandbox_moves_the_lease_end_to_the_time_asked_and_only_once(
    acts: SandboxActivities, engine: LocalEngine
) -> None:
    meta, _ = engine.get_or_create("longer", timeout_seconds=100)
    until = datetime.fromtimestamp(meta.deadline or 0, UTC) + timedelta(seconds=50)
    extend = ExtendSandboxInput(provider="local", sandbox_id="longer", until=until)
    info = await ActivityEnvironment().run(acts.lifecycle.extend_sandbox, extend)
    assert info.state == "running"
    assert info.lease_ends_at == pytest.approx(until, abs=timedelta(seconds=0.01))
    # A retried extension (same end) adds nothing.
    again = await ActivityEnvironment().run(acts.lifecycle.extend_sandbox, extend)
    assert engine.get("longer").deadline == pytest.approx((meta.deadline or 0) + 50)
    assert again.lease_ends_at == info.lease_ends_at


async def test_list_sandboxes_finds_overnight_sandboxes_by_run(
    acts: SandboxActivities, engine: LocalEngine
) -> None:
    engine.get_or_create("a-1", labels={LABEL_RUN: "a", LABEL_ATTEMPT: "1"})
    engine.get_or_create("a-2", labels={LABEL_RUN: "a", LABEL_ATTEMPT: "2"})
    engine.get_or_create("b-1", labels={LABEL_RUN: "b", LABEL_ATTEMPT: "1"})
    engine.get_or_create("other", labels={"team": "x"})
    engine.stop("a-1")
    env = ActivityEnvironment()

    async def names(**fields: Any) -> list[str]:
        found = await env.run(
            acts.lifecycle.list_sandboxes, ListSandboxesInput(provider="local", **fields)
        )
        return [s.sandbox_id for s in found.sandboxes]

    assert await names(run_id="a") == ["a-2"]
    assert await names(run_id="a", include_stopped=True) == ["a-1", "a-2"]
    assert await names() == ["a-2", "b-1"]


async def test_search_attributes_are_none_without_a_client() -> None:
    acts = SandboxActivities(None)
    found = await ActivityEnvironment().run(
        acts.check_search_attributes, SearchAttributeCheckInput()
    )
    assert found.present == []


async def test_search_attributes_registered_by_the_dev_server_are_found(
    dev_client: Client,
) -> None:
    acts = SandboxActivities(dev_client)
    # Tried as a worker tries it (VISIBILITY_CHECK_RETRY): a loaded dev server has been seen
    # to cancel one listing ("operation was canceled"), which its retry then clears.
    for attempt in range(1, VISIBILITY_CHECK_RETRY.maximum_attempts + 1):
        try:
            found = await ActivityEnvironment().run(
                acts.check_search_attributes, SearchAttributeCheckInput()
            )
            break
        except RPCError:
            if attempt == VISIBILITY_CHECK_RETRY.maximum_attempts:
                raise
    assert found.present == list(SEARCH_ATTRIBUTE_TYPES)


# ----- errors -----


async def test_a_missing_secret_fails_at_once_naming_the_variable(
    acts: SandboxActivities,
    engine: LocalEngine,
    repo: Path,
    agent_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(SECRET_NAME, raising=False)
    run = spec(repo, agent_dir, secret_env=[SECRET_NAME])
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(
            acts.create_sandbox, CreateSandboxInput(spec=run, attempt=1)
        )
    assert (raised.value.type, raised.value.non_retryable) == ("MissingSecret", True)
    assert SECRET_NAME in str(raised.value)
    assert engine.list_sandboxes() == []  # refused before anything was made


async def test_a_start_in_a_missing_or_stopped_sandbox_is_not_retried(
    acts: SandboxActivities, engine: LocalEngine, repo: Path, agent_dir: Path
) -> None:
    run = spec(repo, agent_dir)
    engine.get_or_create("halted")
    engine.stop("halted")
    for sandbox_id, error_type in [
        ("no-such-sandbox", "SandboxNotFound"),
        ("halted", "SandboxNotRunning"),
    ]:
        start = StartAgentInput(spec=run, sandbox_id=sandbox_id, attempt=1, fresh_start=1)
        with pytest.raises(ApplicationError) as raised:
            await ActivityEnvironment().run(acts.start_agent, start)
        assert (raised.value.type, raised.value.non_retryable) == (error_type, True)


async def test_a_repository_that_does_not_exist_is_not_retried(
    acts: SandboxActivities, agent_dir: Path, tmp_path: Path
) -> None:
    run = spec(tmp_path / "no-such-repo", agent_dir)
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(
            acts.create_sandbox, CreateSandboxInput(spec=run, attempt=1)
        )
    assert (raised.value.type, raised.value.non_retryable) == ("SpecUnusable", True)
    assert raised.value.message.startswith("field repo: cloning "), raised.value.message
    assert ": not a git repository (fatal: repository " in raised.value.message


async def test_the_runtime_provider_without_a_key_is_not_retried(
    acts: SandboxActivities, engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUNTIME_API_KEY", raising=False)
    ref = SandboxRef(provider="runtime", sandbox_id="any")
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(acts.lifecycle.stop_sandbox, ref)
    assert (raised.value.type, raised.value.non_retryable) == ("MissingCredentials", True)
    assert "RUNTIME_API_KEY" in str(raised.value)


@pytest.mark.parametrize(
    ("error", "error_type", "non_retryable"),
    [
        (ProviderError("503 from Runtime", kind="RuntimeUnavailable"), "RuntimeUnavailable", False),
        (
            ProviderError("bad key", kind="AuthenticationFailed", retryable=False),
            "AuthenticationFailed",
            True,
        ),
        (ProviderError("no credit", kind="SpendingLimit", retryable=False), "SpendingLimit", True),
        (ProviderError("bad body", kind="InvalidRequest", retryable=False), "InvalidRequest", True),
        (SandboxNotFound("s-1"), "SandboxNotFound", True),
    ],
)
def test_provider_errors_become_retryable_or_final_activity_errors(
    error: ProviderError, error_type: str, non_retryable: bool
) -> None:
    translated = to_application_error(error)
    assert (translated.type, translated.non_retryable) == (error_type, non_retryable)
    with pytest.raises(ApplicationError) as raised, activity_errors():
        raise error
    assert (raised.value.type, raised.value.non_retryable) == (error_type, non_retryable)
    assert raised.value.message == str(error)


def test_other_errors_pass_the_boundary_unchanged() -> None:
    with pytest.raises(KeyError), activity_errors():
        raise KeyError("not a provider's")
