"""Coding agents on the runtime provider, end to end: the real dev server, a real worker, the
real `withruntime` SDK against the strict fake Runtime API (its sandboxes real processes on the
local engine), and the real pinned Claude Code CLI against the scripted fake model API.

- A three-tool-call task finishes in one attempt, its work on the run's branch on the origin
  and its spend in the status. The CLI came into the sandbox as a copy of its template
  snapshot: made once (one upload of the install, measured), and not again for a later run.
- A template snapshot that is gone is made again by the next create, with one upload.
- The sandbox deleted during a tool call: a fresh sandbox, made from the cached template,
  resumes the same session id, its transcript carried out of the first sandbox by the worker
  after each checkpoint and uploaded into the second at its create."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
import withruntime
from temporalio.client import Client

from activities.coding_agent.sessions import PULLED_INDEX
from activities.coding_agent.template import CliTemplates
from activities.providers.local.engine import LocalEngine
from activities.providers.local.isolation import bwrap_problem
from activities.providers.runtime.provider import RuntimeProvider
from fakes.git_http import origin_fields
from fakes.model_api import FakeModelApi, ReadFile, Shell, WriteFile, text, tools
from fakes.model_api.turns import Answer
from fakes.runtime import FakeRuntime
from overnight.cli import client as api
from overnight.core.agent_kinds import agent_cli
from overnight.core.coding_agents import install_folder
from overnight.core.home import overnight_home
from overnight.core.local_services import serve_to_agents
from overnight.core.models import RunSpec
from overnight.demo.sample_demo import make_origin
from overnight.worker.agent_clis import Installed
from tests.agent_clis.conftest import agents_home, installed_cli, measure  # noqa: F401
from tests.kinds import facts
from tests.live import granted, in_process_worker, new_run_id, nothing_left_running

CREDENTIAL = facts("claude-code").credential_env
FAKE_KEY = "sk-fake-model-api"
NOTES = "/workspace/app/notes.txt"
# Claude Code ends a bare `sleep` at once; this one runs.
SLOW_CALL = "python3 -c 'import time; time.sleep(120)'"


@dataclass
class RuntimeWorld:
    """One fake Runtime API and one worker for the module: the second run finds the template
    the first one made."""

    fake: FakeRuntime
    queue: str
    home: Path
    runs: list[str]


@pytest.fixture(scope="module")
def claude_code(installed_cli: Callable[[str], Installed]) -> Installed:  # noqa: F811
    if bwrap_problem() is not None:
        pytest.skip(f"the fake Runtime's sandboxes need bubblewrap: {bwrap_problem()}")
    installed = installed_cli("claude-code")
    place = install_folder(agent_cli("claude-code"))
    place.parent.mkdir(parents=True, exist_ok=True)
    if not place.exists():
        place.symlink_to(installed.folder)
    return installed


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(
    dev_client: Client, claude_code: Installed, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RuntimeWorld]:
    root = tmp_path_factory.mktemp("runtime-agents")
    home = root / "runtime-home"
    with pytest.MonkeyPatch.context() as env:
        env.setenv(CREDENTIAL, FAKE_KEY)
        async with (
            FakeRuntime.local(home) as fake,
            nothing_left_running(dev_client, [home]) as runs,
            in_process_worker(dev_client, "rtagents", grants=granted(secret_env=[CREDENTIAL])) as q,
        ):
            fake.use(env, root / "config")
            yield RuntimeWorld(fake, q, home, runs)


def runtime_spec(run_id: str, origin: Path, base_url: str, **more: object) -> RunSpec:
    return RunSpec.model_validate(
        {
            "run_id": run_id,
            "provider": "runtime",
            **origin_fields(origin, "runtime"),
            "agent": {
                "kind": "claude-code",
                "prompt": "Write notes.txt, count its bytes, read it back.",
                "base_url": base_url,
            },
            "secret_env": [CREDENTIAL],
            # The fake model API is plain HTTP on the loopback, which Runtime's egress secrets
            # cannot reach: the key is copied in, as the spec must then say.
            "model_key_in_sandbox": True,
            "poll_seconds": 1,
            "stall_seconds": 120,
            "sandbox_timeout_seconds": 600,
            **more,
        }
    )


@pytest.mark.timeout(420)
async def test_claude_code_on_runtime_finishes_three_tool_calls_in_one_attempt(
    dev_client: Client, world: RuntimeWorld, tmp_path: Path
) -> None:
    fake = world.fake
    run_id = new_run_id("rtclaude")
    world.runs.append(run_id)
    files = make_origin(tmp_path / run_id)
    script: list[Answer] = [
        tools(WriteFile(NOTES, "hello from the fake\n"), label="write"),
        tools(Shell("wc -c < notes.txt"), label="run"),
        tools(ReadFile(NOTES), label="read"),
        text("All three done.", label="final"),
    ]
    uploaded_before = fake.bytes_received(route="upload_part")
    with FakeModelApi(script) as model:
        serve_to_agents(model.port)
        spec = runtime_spec(run_id, files.origin, model.anthropic_base_url)
        began = time.monotonic()
        await api.start_run(dev_client, spec, task_queue=world.queue)
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=360)
        took = time.monotonic() - began
        status = await api.get_status(dev_client, run_id)
        requests = model.requests()

    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert [r.label for r in requests] == ["write", "run", "read", "final"]
    assert len(set(model.session_ids())) == 1 and model.script.unmatched == []
    shown = subprocess.run(
        ["git", "-C", str(files.origin), "show", f"{spec.branch}:notes.txt"],
        capture_output=True,
        text=True,
    )
    assert shown.returncode == 0 and shown.stdout == "hello from the fake\n", shown.stderr
    assert status.spend_model_usd > 0 and status.spend_usd >= status.spend_model_usd
    assert FAKE_KEY not in status.model_dump_json() and FAKE_KEY not in (result.checkpoint or "")

    # The CLI came with the sandbox, a copy of its template snapshot (made by this run, or by
    # an earlier one in this module): never uploaded into the run's own sandbox.
    sandbox = fake.sandbox_named(f"{run_id}-1")
    assert sandbox is not None
    assert fake.bytes_received(route="upload_part", sandbox_id=sandbox) == 0
    cli = agent_cli("claude-code")
    binary = install_folder(cli).resolve() / cli.executable("x64")
    uploaded = fake.bytes_received(route="upload_part") - uploaded_before
    templates = [r for r in fake.requests("POST", r"^/v1/sandboxes/[^/]+:snapshot$")]
    assert len(templates) == 1 and uploaded >= binary.stat().st_size
    measure("runtime: run with the CLI template made first (s)", took)
    measure("runtime: CLI template upload (bytes)", uploaded)

    # History holds the session's id and digest; the transcript went to the worker's store,
    # which the run's end freed.
    [session_id] = set(model.session_ids())
    checkpoint = result.checkpoint or ""
    assert session_id in checkpoint and "hello from the fake" not in checkpoint
    assert not (overnight_home() / "sessions" / run_id).exists()
    print(f"\nrun with template build: {took:.1f} s, {uploaded} bytes uploaded once")


@pytest.mark.timeout(420)
async def test_a_fresh_runtime_sandbox_resumes_the_same_claude_code_session(
    dev_client: Client, world: RuntimeWorld, tmp_path: Path
) -> None:
    fake = world.fake
    run_id = new_run_id("rtresume")
    world.runs.append(run_id)
    files = make_origin(tmp_path / run_id)
    script: list[Answer] = [
        tools(WriteFile(NOTES, "written before the loss\n"), label="write"),
        tools(Shell(SLOW_CALL), label="slow (its sandbox is deleted here)"),
        text("Resumed and done.", label="final"),
    ]
    with FakeModelApi(script) as model:
        serve_to_agents(model.port)
        spec = runtime_spec(run_id, files.origin, model.anthropic_base_url)
        await api.start_run(dev_client, spec, task_queue=world.queue)
        store = overnight_home() / "sessions" / run_id
        first = await _when_the_slow_call_runs(model, store, fake, run_id)
        # The template exists by now (made by the first sandbox's create, or earlier).
        uploads_before = fake.bytes_received(route="upload_part")
        snapshots_before = len(fake.requests("POST", r":snapshot$"))
        lost_at = time.monotonic()
        async with withruntime.AsyncRuntime(api_key=fake.api_key, base_url=fake.url) as rt:
            await rt.sandboxes.delete(first)
        lost = LocalEngine(world.home).get(first)
        assert lost.state == "stopped"
        # Nothing of it runs: not the CLI, nor its slow call (its cgroups gone with them).
        assert [folder for folder in lost.cgroups if Path(folder).exists()] == []
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=300)
        requests = model.requests()

    assert (result.outcome, result.attempts, result.restarts) == ("finished", 2, 1)
    [session_id] = set(model.session_ids())  # the same session in both sandboxes
    labels = [r.label for r in requests]
    assert labels[:2] == ["write", "slow (its sandbox is deleted here)"] and labels[-1] == "final"
    resumed = requests[-1]
    assert resumed.session_id == session_id and resumed.received_at > lost_at
    # Its transcript came back: the resumed CLI sent the first sandbox's tool call again.
    assert "written before the loss" in str(resumed.body)
    second = fake.sandbox_named(f"{run_id}-2")
    assert second is not None and second != first
    # The second sandbox came from the cached template: no new snapshot, no new upload of
    # the CLI; only the session store went in (an archive of the transcript).
    assert len(fake.requests("POST", r":snapshot$")) == snapshots_before
    assert fake.bytes_received(route="upload_part") == uploads_before
    # What carrying the session cost: downloads after checkpoints, one upload at the create.
    pulled = fake.bytes_sent(route="read", sandbox_id=first)
    pushed = sum(
        fake.bytes_received(route=route, sandbox_id=second) for route in ("unarchive", "upload")
    )
    back = resumed.received_at - lost_at
    print(f"\nresumed {session_id} in {second} {back:.1f} s after the loss; bytes read from")
    print(f"the first sandbox (checkpoints and transcript): {pulled}; session put in: {pushed}")
    measure("runtime: sandbox lost to the same session's next model request (s)", back)
    measure("runtime: bytes read from the lost sandbox (checkpoints and session)", pulled)
    measure("runtime: bytes of the session store put into the new sandbox (gzip)", pushed)


async def _when_the_slow_call_runs(
    model: FakeModelApi, store: Path, fake: FakeRuntime, run_id: str
) -> str:
    """The first sandbox's id, once the slow call was handed out and the worker's store holds
    the session up to it (the checkpoint after the write)."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        slow = [r for r in model.requests() if r.label.startswith("slow")]
        if slow and (store / PULLED_INDEX).is_file():
            pulled = [
                p for p in store.rglob("*.jsonl") if "written before the loss" in p.read_text()
            ]
            sandbox = fake.sandbox_named(f"{run_id}-1")
            if pulled and sandbox is not None:
                await asyncio.sleep(1.0)  # the CLI runs the slow call
                return sandbox
        await asyncio.sleep(0.2)
    raise AssertionError(f"the slow call never ran: {[r.label for r in model.requests()]}")


@pytest.mark.timeout(240)
async def test_a_template_that_is_gone_is_made_again_once(world: RuntimeWorld) -> None:
    """The cache: this worker's id, then the label; a deleted template snapshot (its retention
    over, or deleted by hand) is made again by the next create, with one upload."""
    fake = world.fake
    provider = RuntimeProvider()
    templates = CliTemplates()
    spec = runtime_spec("template-gone", Path("/nonexistent"), "http://127.0.0.1:9")
    try:
        # Made here, or found by its label when a test of this module ran here before.
        first = await templates.snapshot_for(provider, spec)
        again = await templates.snapshot_for(provider, spec)
        assert again == first and not templates.uses[-1].built
        await provider.delete_snapshot(first)
        uploaded = fake.bytes_received(route="upload_part")
        began = time.monotonic()
        remade = await templates.snapshot_for(provider, spec)
        took = time.monotonic() - began
        assert remade != first and templates.uses[-1].built
        sent = fake.bytes_received(route="upload_part") - uploaded
        # The binary in parts; the install's small files (package.json, ...) are PUT whole.
        assert 400_000_000 < sent <= templates.uses[-1].uploaded_bytes
        measure("runtime: CLI template made again after it was deleted (s)", took)
        print(f"\ntemplate made again in {took:.1f} s, {sent} bytes uploaded")
    finally:
        await provider.aclose()
