"""Helpers for tests that drive real runs on the session's dev server with an in-process worker.

- `in_process_worker`: AgentRun plus the sandbox activities polling a task queue of their own.
- `worker_process`: `python worker.py` on a task queue of its own, with variables of the test's.
- `granted`: what the tests' workers let specs ask for (overnight/core/grants.py): writable binds
  inside the session's temporary folder (the origins), and what a test adds.
- `scripted_spec`: a RunSpec for tests/agents/scripted (hostile and proving agents).
- `history_text`: a workflow's whole history as searchable text, payloads decoded.
- `task_failures`: how many workflow tasks of a run failed (a crash in workflow code).
- `nothing_left_running`: terminates a test's open runs and stops their sandboxes afterwards.
- `provider_world`: a worker on a fresh queue on either provider (for runtime, the fake
  Runtime API its real SDK speaks to), and `nothing_left_running` around it.
- `running_sandboxes`: a run's sandboxes still running or paused, from the engine's files.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from activities.providers.local.engine import LocalEngine
from fakes.git_http import origin_fields
from fakes.runtime import FakeRuntime
from overnight.core.constants import LABEL_RUN
from overnight.core.grants import Grants
from overnight.core.models import RunSpec
from overnight.demo.outside_world import host_ports_for
from overnight.demo.sample_demo import make_origin
from overnight.worker.devserver import DevServer
from overnight.worker.runner import serve
from tests.conftest import REPO_ROOT, scratch_root
from tests.waits import CAP

SCRIPTED_AGENT = Path(__file__).resolve().parent / "agents" / "scripted"
SCRIPTED_COMMAND = "python3 /workspace/agent/main.py"


def granted(
    *, secret_env: Sequence[str] = (), allow_unisolated: bool = False, **more: Any
) -> Grants:
    """The grants of a test's worker: binds, writable too, inside the session's temporary
    folder (every `tmp_path`, where the origins are), and what the test adds."""
    return Grants(
        writable_bind_roots=(str(scratch_root()),),
        secret_env=tuple(secret_env),
        allow_unisolated=allow_unisolated,
    ).merged(Grants(**more))


@asynccontextmanager
async def in_process_worker(
    client: Client, prefix: str = "live", grants: Grants | None = None
) -> AsyncIterator[str]:
    """A worker on a fresh task queue for the duration of the block; yields the queue.
    `grants`: what specs may ask for of it (default: `granted()`)."""
    queue = f"{prefix}-{uuid.uuid4().hex[:8]}"
    ready, stop = asyncio.Event(), asyncio.Event()
    worker = asyncio.create_task(
        serve(
            client,
            task_queue=queue,
            ready=ready,
            stop=stop,
            grants=granted() if grants is None else grants,
        )
    )
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({worker, waiter}, timeout=CAP, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if worker.done():
        worker.result()
    assert ready.is_set(), "the worker did not start polling"
    try:
        yield queue
    finally:
        stop.set()
        await asyncio.wait_for(worker, timeout=60)


@asynccontextmanager
async def worker_process(
    dev_server: DevServer, queue: str, log_path: Path, env: Mapping[str, str]
) -> AsyncIterator[None]:
    """`python worker.py` polling `queue` for the block, connected to `dev_server`, with this
    process's variables (no TEMPORAL_ or OTEL_ one) and `env`; its output in `log_path`.
    Stopped with SIGTERM afterwards (killed if it does not end)."""
    own = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OTEL_", "TEMPORAL_"))
    }
    own |= {"TEMPORAL_ADDRESS": dev_server.address, "TEMPORAL_NAMESPACE": dev_server.namespace}
    with log_path.open("w") as log:
        worker = subprocess.Popen(
            [sys.executable, str(REPO_ROOT / "worker.py"), "--task-queue", queue],
            cwd=REPO_ROOT,
            env=own | dict(env),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while "worker polling" not in log_path.read_text():
            assert worker.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "the worker did not start polling"
            await asyncio.sleep(0.1)
        yield
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(worker.wait, 30)
        except subprocess.TimeoutExpired:
            worker.kill()


def new_run_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def scripted_spec(run_id: str, root: Path, mode: str, **changes: Any) -> RunSpec:
    """The scripted agent in `mode`, on a fresh bare origin under `root`; quick polls."""
    files = make_origin(root / run_id)
    env = {"AGENT_MODE": mode, **changes.pop("env", {})}
    fields: dict[str, Any] = {
        "run_id": run_id,
        **origin_fields(files.origin, changes.get("provider", "local")),
        "agent_dir": str(SCRIPTED_AGENT),
        "command": SCRIPTED_COMMAND,
        "env": env,
        "poll_seconds": 1,
        "stall_seconds": 60,
        "sandbox_timeout_seconds": 120,
        **changes,
    }
    provider = fields.get("provider", "local")
    fields.setdefault("host_ports", host_ports_for(env.get("OVERNIGHT_LEDGER_URL"), provider))
    return RunSpec.model_validate(fields)


async def history_text(client: Client, run_id: str) -> str:
    """The history as JSON, followed by every base64 string in it decoded (payload data)."""
    history = await client.get_workflow_handle(run_id).fetch_history()
    raw = history.to_json()
    decoded: list[str] = []
    _decode_all(json.loads(raw), decoded)
    return raw + "\n" + "\n".join(decoded)


def _decode_all(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        for item in value.values():
            _decode_all(item, out)
    elif isinstance(value, list):
        for item in value:
            _decode_all(item, out)
    elif isinstance(value, str) and len(value) >= 4:
        try:
            out.append(base64.b64decode(value, validate=True).decode("utf-8", "replace"))
        except (binascii.Error, ValueError):
            pass


async def task_failures(client: Client, run_id: str) -> list[str]:
    """The failure message of every failed workflow task in the run's history."""
    history = await client.get_workflow_handle(run_id).fetch_history()
    return [
        event.workflow_task_failed_event_attributes.failure.message
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]


@asynccontextmanager
async def nothing_left_running(
    client: Client, homes: Sequence[Path | None] = (None,)
) -> AsyncIterator[list[str]]:
    """Yield a list for the run ids a test starts. Afterwards, even when the test failed,
    none is left open and none of their sandboxes (in the engines at `homes`) runs."""
    started: list[str] = []
    try:
        yield started
    finally:
        for run_id in started:
            handle = client.get_workflow_handle(run_id)
            with contextlib.suppress(RPCError):
                if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                    await handle.terminate("test cleanup")
            for home in homes:
                engine = LocalEngine(home)
                for meta in engine.list_sandboxes({LABEL_RUN: run_id}, include_stopped=False):
                    await asyncio.to_thread(engine.stop, meta.id)


@asynccontextmanager
async def provider_world(
    client: Client, provider: str, tmp_path: Path, prefix: str = "live"
) -> AsyncIterator[tuple[str, FakeRuntime | None, list[str]]]:
    """A worker on a fresh queue (and, for runtime, the fake Runtime API it speaks to, with
    its sandboxes under `tmp_path / "runtime-home"`); yields the queue, the fake and the list
    for the run ids the test starts (`nothing_left_running`)."""
    async with AsyncExitStack() as stack:
        fake: FakeRuntime | None = None
        home: Path | None = None
        if provider == "runtime":
            home = tmp_path / "runtime-home"
            env = stack.enter_context(pytest.MonkeyPatch.context())
            fake = await stack.enter_async_context(FakeRuntime.local(home))
            fake.use(env, tmp_path / "config")
        runs = await stack.enter_async_context(nothing_left_running(client, [home]))
        queue = await stack.enter_async_context(in_process_worker(client, f"{prefix}-{provider}"))
        yield queue, fake, runs


def running_sandboxes(run_id: str, home: Path | None = None) -> list[str]:
    """`run_id`'s sandboxes that are running or paused (not stopped) in a local engine."""
    engine = LocalEngine(home)
    return [
        f"{meta.id} ({meta.state})"
        for meta in engine.list_sandboxes({LABEL_RUN: run_id}, include_stopped=False)
    ]
