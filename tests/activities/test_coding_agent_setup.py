"""A coding agent's sandbox (activities/coding_agent/setup.py) on the local provider, in real
bubblewrap sandboxes: its CLI (a stand-in install here; the real CLIs in tests/agent_clis) and
the kit shown read-only under /overnight, the run's session store writable, the adapter's
config written and the adapter started; and the runs this worker refuses at once, with the
one line that says what to do (the CLI not installed, a provider or isolation coding agents do
not run on)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.coding_agent import setup as coding
from activities.models import CreateSandboxInput, SpecCheckInput, StartAgentInput
from activities.providers.local.engine import LocalEngine
from activities.providers.local.isolation import bwrap_problem
from activities.providers.local.provider import LocalProvider
from activities.sandbox.activities import SandboxActivities
from overnight.core.agent_kinds import AgentCli, agent_cli, npm_cpu
from overnight.core.coding_agents import (
    INSTALL_SCRIPT,
    INSTALLED_MARKER,
    install_folder,
    sandbox_executable,
    sandbox_folder,
)
from overnight.core.grants import SPEC_REFUSED
from overnight.core.home import HOME_ENV
from overnight.core.models import RunSpec
from tests.activities.test_activities import git
from tests.live import granted

needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason=str(bwrap_problem()))


def fake_install(home: Path, cli: AgentCli) -> Path:
    """A stand-in for an installed CLI: the marker and an executable that prints the version
    line (what `check` and the sandbox need of it), world-readable as the installer makes it."""
    folder = install_folder(cli, home)
    binary = folder / cli.executable(npm_cpu(os.uname().machine))
    binary.parent.mkdir(parents=True)
    binary.write_text(f"#!/bin/sh\necho '{cli.version_line}'\n")
    binary.chmod(0o755)
    (folder / INSTALLED_MARKER).write_text(json.dumps({"npm_spec": cli.npm_spec}))
    for place in [home, *home.rglob("*")]:
        if place.is_dir():
            place.chmod(0o755)
    return binary


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv(HOME_ENV, str(path))
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    path.chmod(0o755)
    git(path, "init", "-q", "-b", "main")
    (path / "README").write_text("hello\n")
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "first")
    return path


def agent_spec(repo: Path | str = "https://example.com/app.git", **fields: Any) -> RunSpec:
    agent = {"kind": "claude-code", "prompt": "Make the tests pass"} | fields.pop("agent", {})
    return RunSpec(run_id=f"agent-{uuid.uuid4().hex[:8]}", repo=str(repo), agent=agent, **fields)


@pytest.fixture
async def acts(home: Path) -> AsyncIterator[SandboxActivities]:
    engine = LocalEngine(home)
    activities = SandboxActivities(
        providers={"local": LocalProvider(engine)}, grants=granted(secret_env=["FAKE_KEY"])
    )
    async with activities:
        yield activities
    for meta in engine.list_sandboxes():
        engine.stop(meta.id)


# ----- what the worker refuses -----


def test_a_kind_not_installed_is_refused_with_the_command_that_fixes_it(home: Path) -> None:
    [line] = coding.refusals(agent_spec(), home)
    assert line.startswith("field agent: claude-code 2.1.332 is not installed on this worker")
    assert str(home / "agents") in line and line.endswith(f"run {INSTALL_SCRIPT} there")
    fake_install(home, agent_cli("claude-code"))
    assert coding.refusals(agent_spec(), home) == []
    assert coding.refusals(agent_spec(agent={"kind": "codex"}), home) != []


def test_runtime_takes_coding_agents_from_an_x86_64_worker_and_unisolated_is_refused(
    home: Path,
) -> None:
    on_runtime = agent_spec(provider="runtime")
    [missing] = coding.refusals(on_runtime, home, machine="x86_64")
    assert missing.startswith("field agent: claude-code 2.1.332 is not installed")
    fake_install(home, agent_cli("claude-code"))
    assert coding.refusals(on_runtime, home, machine="x86_64") == []
    # Runtime's sandboxes are x86_64: an arm64 worker's install is not theirs.
    [arm] = coding.refusals(on_runtime, home, machine="aarch64")
    assert arm.startswith("field provider: Runtime sandboxes are x86_64") and "aarch64" in arm
    [unisolated] = coding.refusals(agent_spec(isolation="none"), home)
    assert unisolated.startswith("field isolation: coding agents (agent) run only in isolated")


def test_an_agent_of_ones_own_is_none_of_its_business(home: Path) -> None:
    own = RunSpec(repo="https://example.com/a.git", agent_dir="/srv/agent", command="python3 x")
    assert coding.refusals(own, home) == [] and coding.mounts(own, home) == ()


async def test_the_run_is_refused_at_its_start_before_anything_is_made(
    acts: SandboxActivities, home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-fake")
    spec = agent_spec(repo, secret_env=["FAKE_KEY"])
    checked = await ActivityEnvironment().run(acts.check_spec, SpecCheckInput(spec=spec))
    [line] = checked.refusals
    assert (
        line.startswith("field agent: claude-code 2.1.332 is not installed")
        and INSTALL_SCRIPT in line
    )
    with pytest.raises(ApplicationError) as caught:
        await ActivityEnvironment().run(
            acts.create_sandbox, CreateSandboxInput(spec=spec, attempt=1)
        )
    assert caught.value.type == SPEC_REFUSED and caught.value.non_retryable
    assert caught.value.message == f"spec: {line}"
    assert not (home / "sandboxes").exists() or not list(
        (home / "sandboxes").glob(f"{spec.run_id}*")
    )
    with pytest.raises(ApplicationError) as again:
        coding.refuse_unless_runnable(spec)
    assert again.value.type == SPEC_REFUSED and again.value.message == f"spec: {line}"


# ----- the config -----


def test_the_adapters_config_holds_the_agent_the_run_and_where_things_are(home: Path) -> None:
    spec = agent_spec(
        agent={
            "kind": "codex",
            "model": "gpt-5.5-codex",
            "max_turns": 30,
            "base_url": "http://h:1",
        },
        branch="work/x",
    )
    config = json.loads(coding.config_bytes(spec, environ={}))
    cli = agent_cli("codex")
    assert config == {
        "kind": "codex",
        "prompt": "Make the tests pass",
        "model": "gpt-5.5-codex",
        "max_turns": 30,
        "base_url": "http://h:1",
        "cli": sandbox_executable(cli, os.uname().machine),
        "run_id": spec.run_id,
        "branch": "work/x",
        "cwd": "/workspace/app",
        "checkpoint_path": "/workspace/checkpoint.json",
        "loop_repeats": 8,
        "prices": coding.DEFAULT_PRICES,
        "usage_backoff_seconds": coding.USAGE_BACKOFF_SECONDS,
        "api_backoff_seconds": coding.API_BACKOFF_SECONDS,
        "session_store": "/overnight/session",
    }
    assert config["cli"].startswith(f"{sandbox_folder(cli)}/node_modules/@openai/codex-linux-")
    assert coding.adapter_command() == (
        "python3 /overnight/kit/coding_agent.py --config /workspace/.overnight/coding-agent.json"
    )


def test_the_worker_may_set_the_price_table(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps(
            {
                "gpt-5": {"input_per_mtok": 2, "output_per_mtok": 8, "cached_input_per_mtok": 0.2},
                "my-model": {"input_per_mtok": 0.5, "output_per_mtok": 1},
            }
        )
    )
    table = coding.model_prices({coding.PRICES_ENV: str(prices)})
    assert table["gpt-5"] == {
        "input_per_mtok": 2.0,
        "output_per_mtok": 8.0,
        "cached_input_per_mtok": 0.2,
    }
    assert table["my-model"]["cached_input_per_mtok"] == 0.0
    assert table["gpt-5-mini"] == coding.DEFAULT_PRICES["gpt-5-mini"]
    for bad in ("[1]", '{"m": {"input_per_mtok": -1}}', '{"m": {"inputs": 1}}', "{"):
        prices.write_text(bad)
        with pytest.raises(ApplicationError) as caught:
            coding.model_prices({coding.PRICES_ENV: str(prices)})
        assert caught.value.non_retryable and caught.value.message.startswith(
            f"{coding.PRICES_ENV}={prices}: "
        )


def test_the_worker_may_set_the_adapters_backoffs() -> None:
    assert coding.worker_backoffs({}) == (900.0, [30.0, 60.0, 120.0, 300.0, 600.0])
    given = {coding.USAGE_BACKOFF_ENV: "5", coding.API_BACKOFF_ENV: "0.5, 2,10"}
    assert coding.worker_backoffs(given) == (5.0, [0.5, 2.0, 10.0])
    config = json.loads(coding.config_bytes(agent_spec(), given))
    assert (config["usage_backoff_seconds"], config["api_backoff_seconds"]) == (5.0, [0.5, 2, 10])
    for name, bad in [
        (coding.API_BACKOFF_ENV, "soon"),
        (coding.API_BACKOFF_ENV, "1,-2"),
        (coding.USAGE_BACKOFF_ENV, "1,2"),
        (coding.USAGE_BACKOFF_ENV, "1e9"),
    ]:
        with pytest.raises(ApplicationError) as caught:
            coding.worker_backoffs({name: bad})
        assert caught.value.non_retryable and caught.value.message.startswith(f"{name}={bad}: ")


# ----- the sandbox -----


@needs_bwrap
async def test_a_coding_agents_sandbox_sees_its_cli_and_kit_read_only_and_its_session_store(
    acts: SandboxActivities, home: Path, repo: Path
) -> None:
    cli = agent_cli("claude-code")
    fake_install(home, cli)
    spec = agent_spec(repo, secret_env=["FAKE_KEY"])
    os.environ["FAKE_KEY"] = "sk-fake"
    try:
        started = await ActivityEnvironment().run(
            acts.create_sandbox, CreateSandboxInput(spec=spec, attempt=1, checkpoint="{}")
        )
    finally:
        del os.environ["FAKE_KEY"]
    sid = started.sandbox_id
    engine = LocalEngine(home)
    meta = engine.get(sid)
    assert [(m["target"], m["writable"]) for m in meta.mounts] == [
        (sandbox_folder(cli), False),
        (coding.KIT_READ_ONLY, False),
        (coding.SESSION_MOUNT, True),
    ]
    assert "/overnight/session (writable)" in (started.isolation or "")
    config = json.loads(engine.host_path(sid, coding.ADAPTER_CONFIG).read_text())
    assert config["run_id"] == spec.run_id and config["session_store"] == coding.SESSION_MOUNT
    assert not engine.host_path(sid, "/workspace/agent").exists()  # no agent_dir to upload
    assert engine.host_path(sid, "/workspace/.overnight/kit/overnight_agent.py").is_file()
    launch = json.loads(
        (engine.folder(sid) / "processes" / started.process_id / "launch.json").read_text()
    )
    assert launch["sandbox_command"] == coding.adapter_command()

    binary = sandbox_executable(cli, os.uname().machine)
    probe = (
        f"{binary}; touch {sandbox_folder(cli)}/x 2>&1; touch /overnight/kit/x 2>&1; "
        "test -f /overnight/kit/overnight_agent.py && echo kit-there; "
        "echo kept > /overnight/session/s && echo session-written; "
        "touch /tmp/t && echo tmp-writable; touch $HOME/h && echo home-writable; "
        "stat -c %a /home /overnight /overnight/agents; id -u; echo HOME=$HOME"
    )
    said = await LocalProvider(engine).run(sid, probe)
    out = said.stdout + said.stderr
    assert cli.version_line in out
    assert out.count("Read-only file system") == 2, out
    for word in ("kit-there", "session-written", "tmp-writable", "home-writable"):
        assert word in out, out
    assert "755\n755\n755" in out, out
    # The store is the run's, under the worker's home, inside the sandbox's disk limit.
    store = Path(meta.mounts[2]["source"])
    assert store.is_relative_to(home / "sessions" / spec.run_id)
    assert (store / "s").read_text() == "kept\n"
    said_disk = (started.isolation or "").split("; disk ")[-1]
    assert "/overnight/session measured with it" in said_disk or "MiB of it for" in said_disk
    if os.geteuid() == 0:
        assert str(meta.uid) in out and store.stat().st_uid == meta.uid

    # A start in the same sandbox (a fresh context) writes the worker's config again.
    engine.host_path(sid, coding.ADAPTER_CONFIG).write_text('{"cli": "/bin/sh"}')
    again = StartAgentInput(spec=spec, sandbox_id=sid, attempt=1, fresh_start=1)
    os.environ["FAKE_KEY"] = "sk-fake"
    try:
        await ActivityEnvironment().run(acts.start_agent, again)
    finally:
        del os.environ["FAKE_KEY"]
    assert json.loads(engine.host_path(sid, coding.ADAPTER_CONFIG).read_text()) == config


@needs_bwrap
async def test_a_create_and_a_start_each_look_the_cli_up_once(
    acts: SandboxActivities, home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_install(home, agent_cli("claude-code"))
    looked_up: list[str] = []

    def counted(kind: str) -> AgentCli:
        looked_up.append(kind)
        return agent_cli(kind)

    # The refusal, the environment, the mounts and the config all take the one row.
    monkeypatch.setattr(coding, "agent_cli", counted)
    monkeypatch.setenv("FAKE_KEY", "sk-fake")
    spec = agent_spec(repo, secret_env=["FAKE_KEY"])
    started = await ActivityEnvironment().run(
        acts.create_sandbox, CreateSandboxInput(spec=spec, attempt=1, checkpoint="{}")
    )
    assert looked_up == ["claude-code"]
    again = StartAgentInput(spec=spec, sandbox_id=started.sandbox_id, attempt=1, fresh_start=1)
    await ActivityEnvironment().run(acts.start_agent, again)
    assert looked_up == ["claude-code", "claude-code"]


def test_on_runtime_the_adapter_runs_from_the_uploaded_kit_and_the_cli_from_its_template(
    home: Path,
) -> None:
    spec = agent_spec(provider="runtime")
    assert coding.mounts(spec, home) == ()
    assert coding.adapter_command(spec).startswith("python3 /workspace/.overnight/kit/")
    config = coding.adapter_config(spec, {})
    assert config["cli"] == (
        "/workspace/.overnight/agents/claude-code-2.1.332/"
        "node_modules/@anthropic-ai/claude-code-linux-x64/claude"
    )
    assert config["session_store"] == "/workspace/.overnight/session"
