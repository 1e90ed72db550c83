"""The worker SIGKILLed while its gateway carries a streamed answer (issue 49, test 6;
docs/gateway.md, "What a worker's SIGKILL loses"), end to end: the session's dev server, the
worker as a `python worker.py` process of its own (so it can be SIGKILLed; this process holds
the dev server and the fake model API), real Claude Code in a bubblewrap sandbox, its model
calls through the worker's gateway to the fake.

The fake's second answer stops after its text block and holds the connection open, silent.
Once the CLI has printed that block (the adapter's log says it), the worker is SIGKILLed and a
new one started on the same `OVERNIGHT_HOME`. The CLI, in a sandbox that outlives the worker,
sees its stream cut and asks again through its relay, which dials the gateway's port: the new
gateway listens on the port the home's port file names. Claude Code does not send the same
request again: it sends the part it got and a note that the answer "was cut off mid-stream".
The run goes on in the same attempt, the same sandbox and session: the agent's processes are
not the worker's children (they live in sessions of their own, and the sandbox's relay is its
launcher's child), and the new worker takes the run over once the killed worker's watch of the
agent misses its heartbeat (30 s at `poll_seconds: 1`, most of the time from the kill to the
run's end). The gateway's ledger holds exactly the answers that ended: the stream cut, and only
it, is lost (an answer is booked as it ends).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client

from activities.gateway import service as gateway_service
from activities.providers.local.disk_limit import DISK_ENV
from activities.providers.local.engine import LocalEngine
from activities.providers.local.isolation import bwrap_problem
from fakes.model_api import FakeModelApi, Shell, text, tools
from fakes.model_api.recorded import RecordedRequest
from fakes.model_api.turns import Answer
from overnight.cli import client as api
from overnight.core.agent_kinds import agent_cli
from overnight.core.coding_agents import install_folder
from overnight.core.constants import LABEL_RUN
from overnight.core.grants import SECRET_ENV_ENV, WRITABLE_BIND_ROOTS_ENV
from overnight.core.home import HOME_ENV
from overnight.core.model_prices import DEFAULT_PRICES, Usage, dearest, price_of, usd_of
from overnight.demo.sample_demo import make_origin
from overnight.worker.agent_clis import Installed
from overnight.worker.devserver import DevServer
from tests.agent_clis.conftest import agents_home, installed_cli, measure  # noqa: F401
from tests.chaos.stack import WorkerPool, worker_env
from tests.conftest import scratch_root
from tests.e2e.coding_agent_runs import ADAPTER, CREDENTIAL, FAKE_KEY, QUICK_BACKOFFS, coding_spec
from tests.e2e.helpers import new_run_id
from tests.live import nothing_left_running

CLAUDE = "claude-code"
OBSERVE = "observe_agent"
STARTED = PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
CUT_TEXT = "Half of an answer."
# Each answer's usage is its own, so the ledger says which were booked.
SCRIPT: list[Answer] = [
    tools(Shell("echo one > one.txt"), label="ended", input_tokens=10_000),
    # message_start (its usage) and the text block whole, then silence, held open.
    tools(
        Shell("echo two > two.txt"),
        text=CUT_TEXT,
        label="cut",
        input_tokens=200_000,
        cut_after=4,
        hold_open=True,
    ),
    text("Done.", label="after the cut", input_tokens=30_000),
]
# Claude Code's words to the model in the request after a cut stream (2.1.332).
CUT_NOTE = "cut off mid-stream"


def priced(requests: list[RecordedRequest]) -> float:
    """What the fake's answers to `requests` cost at the worker's price table."""
    usd = 0.0
    for request in requests:
        assert request.turn_index is not None
        turn = SCRIPT[request.turn_index]
        price = price_of(DEFAULT_PRICES, request.model) or dearest(DEFAULT_PRICES)
        used = Usage(input_tokens=turn.input_tokens, output_tokens=turn.output_tokens)
        usd += usd_of(price, used)
    return usd


def worker_settings(server: DevServer, home: Path) -> dict[str, str]:
    """A worker process's environment: the session's dev server, `home`, the fake's key (held
    at the gateway), the origins' binds and the adapter's short backoffs."""
    return worker_env(
        dict(os.environ),
        {
            "TEMPORAL_ADDRESS": server.address,
            "TEMPORAL_NAMESPACE": server.namespace,
            HOME_ENV: str(home),
            SECRET_ENV_ENV: CREDENTIAL,
            WRITABLE_BIND_ROOTS_ENV: str(scratch_root()),
            DISK_ENV: "watch",
            CREDENTIAL: FAKE_KEY,
            **QUICK_BACKOFFS,
        },
    )


def link_claude_code(installed: Installed, home: Path) -> None:
    """The session's install of Claude Code, in `home`'s agents folder."""
    place = install_folder(agent_cli(CLAUDE), home)
    place.parent.mkdir(parents=True, exist_ok=True)
    place.symlink_to(installed.folder)


def adapter_said(home: Path, sandbox_id: str, words: str) -> bool:
    """The adapter's log in the sandbox has the CLI saying `words` (an assistant text block
    the CLI printed, as its stream-json output gives it once the block ends)."""
    log = LocalEngine(home).folder(sandbox_id) / "workspace/.overnight/coding-agent/log.jsonl"
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    wanted = {"event": "note", "text": f"said: {words}"}
    return any(wanted.items() <= _parsed(line).items() for line in lines)


def _parsed(line: str) -> dict[str, Any]:
    try:
        found = json.loads(line)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def without_cache_marks(value: Any) -> Any:
    """`value` without its `cache_control` marks (a client moves them to its latest message)."""
    if isinstance(value, dict):
        return {k: without_cache_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_marks(item) for item in value]
    return value


def ledger(home: Path, run_id: str) -> list[dict[str, Any]]:
    """The gateway's lines for the run (docs/gateway.md, "The ledger")."""
    path = gateway_service.folder_of(home) / "spend" / f"{run_id}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def until(probe: Callable[[], object], what: str, timeout: float = 120) -> None:
    """Until `probe()` (a plain function, or one returning an awaitable) is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        found = await asyncio.to_thread(probe)
        if inspect.isawaitable(found):
            found = await found
        if found:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not in {timeout} s: {what}")
        await asyncio.sleep(0.05)


async def only_watching(client: Client, run_id: str) -> bool:
    """The run's one step in flight is its watch of the agent, started on a worker. (A step
    without heartbeats in flight at a SIGKILL waits out its timeout, up to minutes, before it
    is tried again: the chaos harness's business, not this test's.)"""
    described = await client.get_workflow_handle(run_id).describe()
    pending = described.raw_description.pending_activities
    return [p.activity_type.name for p in pending] == [OBSERVE] and pending[0].state == STARTED


@pytest.mark.long
@pytest.mark.heavy
@pytest.mark.timeout(240)
async def test_a_worker_sigkilled_mid_stream_costs_the_cli_a_retry_and_the_ledger_that_stream(
    dev_server: DevServer,
    dev_client: Client,
    installed_cli: Callable[[str], Installed],  # noqa: F811
    tmp_path: Path,
) -> None:
    if bwrap_problem() is not None:
        pytest.skip(f"coding agents run only in isolated sandboxes: {bwrap_problem()}")
    assert ADAPTER.is_file()
    home = tmp_path / "home"  # its own: no gateway of this process's workers serves it
    link_claude_code(installed_cli(CLAUDE), home)
    pool = WorkerPool(
        1, worker_settings(dev_server, home), f"gw-kill-{uuid.uuid4().hex[:8]}", tmp_path
    )
    [worker] = pool.workers
    run_id = new_run_id("gw-kill")
    sandbox_id = f"{run_id}-1"
    try:
        with FakeModelApi(SCRIPT) as fake:
            async with nothing_left_running(dev_client, [home]) as runs:
                pool.start(worker)
                await pool.wait_ready()
                port = gateway_service.port_of(home)
                spec = coding_spec(run_id, make_origin(tmp_path / run_id), fake)
                runs.append(run_id)
                await api.start_run(dev_client, spec, task_queue=pool.task_queue)
                # Mid-stream: the gateway carried the second answer's first block to the CLI,
                # and the fake holds the rest.
                await until(lambda: adapter_said(home, sandbox_id, CUT_TEXT), "half an answer")
                await until(lambda: only_watching(dev_client, run_id), "only the watch going")
                booked_before = gateway_service.spend_of(home, run_id)
                killed = time.monotonic()
                pool.kill(worker)
                pool.start(worker)
                await until(lambda: gateway_service.live_port(home) is not None, "a gateway")
                listening = time.monotonic()
                [*_, asked_again] = await asyncio.to_thread(fake.wait_for_requests, 3, 120)
                await pool.wait_ready()
                result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=180)
                finished = time.monotonic()
                status = await api.get_status(dev_client, run_id)
                requests = fake.requests()
                books = gateway_service.spend_of(home, run_id)
                lines = ledger(home, run_id)
                used = LocalEngine(home).list_sandboxes({LABEL_RUN: run_id}, include_stopped=True)
    finally:
        pool.stop_all()
    seconds = {
        "to a gateway on its port": listening - killed,
        "to the CLI's next request": asked_again.received_at - killed,
        "to the run's end": finished - killed,
    }
    for what, value in seconds.items():
        measure(f"gateway SIGKILLed mid-stream: {what} (s)", value)
    print("\nworker SIGKILLed mid-stream:", ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items()))

    ended, cut, after = requests
    assert [r.label for r in requests] == ["ended", "cut", "after the cut"], requests
    # The first answer was on the books before the kill.
    assert booked_before == (pytest.approx(priced([ended])), 1)
    # The new gateway serves the old port: the sandbox's relay reached it.
    assert gateway_service.port_of(home) == port
    # The CLI asked again, once, in its own way: the same conversation, then the part of the
    # answer it got and its note that the answer was cut.
    assert without_cache_marks(after.items()[: len(cut.items())]) == without_cache_marks(
        cut.items()
    )
    said, note = after.items()[len(cut.items()) :]
    assert said["role"] == "assistant" and [b.get("text") for b in said["content"]] == [CUT_TEXT]
    assert note["role"] == "user" and CUT_NOTE in json.dumps(note)
    assert len(fake.session_ids()) == 1
    # The run went on in the same attempt and sandbox: the agent never stopped.
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert [box.id for box in used] == [sandbox_id]
    # The ledger lost the stream cut, and nothing else: the answers that ended, each whole.
    assert [line["request_id"] for line in lines] == ["msg_fake_0001", "msg_fake_0003"]
    assert all(line["complete"] for line in lines)
    assert books == (pytest.approx(priced([ended, after])), 2)
    assert priced(requests) - books[0] == pytest.approx(priced([cut]))
    assert status.spend_model_source == "gateway"
    assert status.spend_model_usd == pytest.approx(books[0], abs=0.005)
    # What the gateway lost shows beside it: the adapter counted the cut stream's usage (its
    # message_start reached the CLI), and the status shows its figure as they differ.
    assert status.spend_model_reported_usd == pytest.approx(priced(requests), abs=0.005)
