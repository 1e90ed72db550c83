"""Shared pieces of the end-to-end coding-agent tests (tests/e2e/test_coding_agent*.py): a
worker granting the CLIs' credentials, the session's installs of the real CLIs (`kind`: either
one, its credential set), a spec for a coding-agent run against the fake model API, and what
the tests look for on the host (the CLI's process, the run's sandboxes, files inside them).

The fake model API answers on the loopback in this process; each test's waits on it block,
so they run in a thread (`fake_wait`), never on the event loop the in-process worker shares.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio
from temporalio.client import Client

from activities.providers.local.isolation import bwrap_problem
from activities.providers.local.provider import LocalProvider
from fakes.git_http import origin_fields
from fakes.model_api import FakeModelApi
from overnight.cli import client as api
from overnight.core.agent_kinds import agent_cli
from overnight.core.coding_agents import install_folder
from overnight.core.constants import LABEL_ATTEMPT, LABEL_RUN
from overnight.core.local_services import serve_to_agents
from overnight.core.models import RunResult, RunSpec
from overnight.demo.sample_demo import DemoFiles, make_origin
from overnight.worker.agent_clis import Installed
from tests.agent_clis.clis import executable_name, parent
from tests.e2e.helpers import agent_pids, new_run_id
from tests.kinds import KIND_FACTS, facts
from tests.live import granted, in_process_worker

ADAPTER = Path(__file__).resolve().parents[2] / "overnight" / "agent_kit" / "coding_agent.py"
# Claude Code's (the runs' default kind): its key, and its subscription mode's (usage windows).
CREDENTIAL = facts("claude-code").credential_env
SUBSCRIPTION = facts("claude-code").subscription_env
FAKE_KEY = "sk-fake-model-api"
# The adapter's backoffs, short (worker settings: activities/coding_agent/setup.py).
QUICK_BACKOFFS = {
    "OVERNIGHT_MODEL_API_BACKOFF_SECONDS": "0.5",
    "OVERNIGHT_USAGE_BACKOFF_SECONDS": "1",
}

T = TypeVar("T")


@pytest_asyncio.fixture(loop_scope="session")
async def agents_queue(dev_client: Client) -> AsyncIterator[str]:
    """A worker granting the CLIs' credentials (and the origins' writable binds)."""
    secrets = [
        name
        for kind in KIND_FACTS.values()
        for name in (kind.credential_env, kind.subscription_env)
        if name
    ]
    async with in_process_worker(dev_client, "agents", grants=granted(secret_env=secrets)) as queue:
        yield queue


def link_install(installed_cli: Callable[[str], Installed], kind: str) -> Installed:
    """The session's install of `kind`, in this worker's `$OVERNIGHT_HOME/agents` (a link: the
    worker's read-only mount follows it); skips where coding agents cannot run."""
    if not ADAPTER.is_file():
        pytest.skip(f"the adapter {ADAPTER.name} is not on this tree yet")
    if bwrap_problem() is not None:
        pytest.skip(f"coding agents run only in isolated sandboxes: {bwrap_problem()}")
    installed = installed_cli(kind)
    place = install_folder(agent_cli(kind))
    place.parent.mkdir(parents=True, exist_ok=True)
    if not place.exists():
        place.symlink_to(installed.folder)
    return installed


@pytest.fixture
def claude_code(installed_cli: Callable[[str], Installed]) -> Installed:
    return link_install(installed_cli, "claude-code")


@pytest.fixture
def credential(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake's key in the worker's environment, and the adapter's short backoffs."""
    monkeypatch.setenv(CREDENTIAL, FAKE_KEY)
    for name, value in QUICK_BACKOFFS.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(params=sorted(KIND_FACTS))
def kind(
    request: pytest.FixtureRequest,
    installed_cli: Callable[[str], Installed],
    credential: None,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[str]:
    """Each CLI, installed for this worker, with its credential set. A link it made goes
    afterwards: the not-installed test wants a kind this worker lacks (Codex)."""
    name = str(request.param)
    place = install_folder(agent_cli(name))
    made = not place.exists()
    link_install(installed_cli, name)
    monkeypatch.setenv(facts(name).credential_env, FAKE_KEY)
    yield name
    if made and place.is_symlink():
        place.unlink()


def coding_spec(
    run_id: str,
    files: DemoFiles,
    fake: FakeModelApi,
    *,
    kind: str = "claude-code",
    prompt: str = "Do the task.",
    credential: str | None = None,
    **changes: Any,
) -> RunSpec:
    """A coding-agent run of `kind` against `fake` (its port served to the sandbox), on the
    origin of `files`, watched closely (one-second polls)."""
    serve_to_agents(fake.port)  # the worker in this process vouches for the fake's port
    base_url = facts(kind).base_url(fake)
    fields: dict[str, Any] = {
        "run_id": run_id,
        **origin_fields(files.origin, "local"),
        "agent": {"kind": kind, "prompt": prompt, "base_url": base_url},
        "secret_env": [credential or facts(kind).credential_env],
        "host_ports": [fake.port],
        "poll_seconds": 1,
        "stall_seconds": 120,
        "sandbox_timeout_seconds": 600,
    }
    agent = changes.pop("agent", {})
    fields["agent"].update(agent)
    fields.update(changes)
    return RunSpec.model_validate(fields)


def new_origin(runs: list[str], root: Path, prefix: str) -> tuple[str, DemoFiles]:
    """A new run id (in `runs`, for the clean-up) and a fresh origin for it under `root`."""
    run_id = new_run_id(prefix)
    runs.append(run_id)
    return run_id, make_origin(root / run_id)


async def start_coding_run(
    client: Client,
    queue: str,
    runs: list[str],
    root: Path,
    fake: FakeModelApi,
    prefix: str,
    **options: Any,
) -> tuple[RunSpec, DemoFiles]:
    """Start a coding-agent run (`coding_spec`'s options) on a fresh origin under `root`."""
    run_id, files = new_origin(runs, root, prefix)
    spec = coding_spec(run_id, files, fake, **options)
    await api.start_run(client, spec, task_queue=queue)
    return spec, files


async def run_result(client: Client, run_id: str, timeout: float = 240) -> RunResult:
    """The run's result, waited for up to `timeout` seconds (a cap on the wait, not a bound)."""
    return await asyncio.wait_for(api.wait_result(client, run_id), timeout=timeout)


async def fake_wait(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """One of the fake's blocking waits, off the event loop."""
    return await asyncio.to_thread(call, *args, **kwargs)


async def until(probe: Callable[[], Any], timeout: float = 180, what: str = "") -> Any:
    """Poll `probe` (a plain function, or one returning an awaitable) until it is truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"not in {timeout} s: {what}")


def cli_pids(run_id: str, kind: str = "claude-code") -> list[int]:
    """The run's live CLI processes on the host: the topmost running the CLI's binary among
    the processes carrying the run's id in their environment (the adapter passes its own on)."""
    name = facts(kind).binary
    return [
        pid
        for pid in agent_pids(run_id)
        if executable_name(pid) == name and executable_name(parent(pid)) != name
    ]


def named_pids(run_id: str, name: str) -> list[int]:
    """The run's live processes running the executable `name` (a tool's `sleep`, ...)."""
    return [pid for pid in agent_pids(run_id) if executable_name(pid) == name]


async def sandbox_ids(run_id: str) -> list[str]:
    """Every sandbox the run made for its agent, stopped ones too, by attempt (not those its
    done checks ran in)."""
    found = await LocalProvider().list({LABEL_RUN: run_id}, include_stopped=True)
    found = [box for box in found if LABEL_ATTEMPT in box.labels]
    found.sort(key=lambda s: int(s.labels.get(LABEL_ATTEMPT, "0")))
    return [s.sandbox_id for s in found]


async def adapter_log(sandbox_id: str) -> list[dict[str, Any]]:
    """The adapter's own log in a sandbox (`.overnight/coding-agent/log.jsonl`)."""
    read = await LocalProvider().read_file(
        sandbox_id, "/workspace/.overnight/coding-agent/log.jsonl", 4 * 1024 * 1024
    )
    lines = (read.data or b"").decode("utf-8", "replace").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def session_mentions(sandbox_id: str, text: str, kind: str = "claude-code") -> bool:
    """Whether the CLI's session file in the sandbox (as written so far) holds `text`."""
    home = LocalProvider().engine.folder(sandbox_id) / "home"
    for path in home.glob(facts(kind).session_files):
        try:
            if text in path.read_text(encoding="utf-8", errors="replace"):
                return True
        except OSError:
            continue
    return False
