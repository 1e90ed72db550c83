"""`overnight replay-check` against a real dev server of its own: real runs (open and closed)
replay on this tree's code and the check says how many; a run made by an incompatible
`AgentRun` fails the check naming it (exit 1); and this tree's runs replayed against that
incompatible class fail naming one of them.

The server is this module's own, so its namespace holds exactly the runs made here, and the
incompatible run reaches no other test's check."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from overnight.cli import client as api
from overnight.cli.main import build_parser
from overnight.cli.replay_check import (
    ReplayCheckInputError,
    history_query,
    parse_since,
    replay_check,
)
from overnight.worker.devserver import DevServer, start_or_reuse
from tests.cli.divergent_workflows import DivergentAgentRun
from tests.conftest import dev_config_on_free_ports
from tests.live import in_process_worker, new_run_id, nothing_left_running, scripted_spec
from tests.waits import CAP

OVERNIGHT = Path(sys.executable).parent / "overnight"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_since_takes_a_number_and_a_unit_or_zero_for_open_runs_only() -> None:
    assert parse_since("2d") == timedelta(days=2)
    assert parse_since(" 12h") == timedelta(hours=12)
    assert parse_since("90s") == timedelta(seconds=90)
    assert parse_since("0") == timedelta(0)
    for bad in ("", "2", "-1d", "2w", "1.5h", "d"):
        with pytest.raises(ReplayCheckInputError, match="--since"):
            parse_since(bad)


def test_the_query_asks_for_open_runs_and_those_closed_within_since() -> None:
    query = history_query(["AgentRun", "OvernightNotify"], timedelta(days=2), NOW)
    assert query == (
        "WorkflowType IN ('AgentRun', 'OvernightNotify') AND "
        "(ExecutionStatus = 'Running' OR CloseTime > '2026-11-29T12:00:00Z')"
    )
    only_open = history_query(["AgentRun"], timedelta(0), NOW)
    assert only_open == "WorkflowType IN ('AgentRun') AND ExecutionStatus = 'Running'"


def test_the_namespace_may_come_before_or_after_the_command() -> None:
    parser = build_parser()
    assert parser.parse_args(["--namespace", "a", "replay-check"]).namespace == "a"
    assert parser.parse_args(["replay-check", "--namespace", "b"]).namespace == "b"
    assert parser.parse_args(["replay-check"]).namespace is None


def test_a_bad_since_is_bad_input_before_any_connection() -> None:
    done = subprocess.run(
        [str(OVERNIGHT), "--address", "127.0.0.1:1", "replay-check", "--since", "soon"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and "--since 'soon'" in done.stderr


@pytest_asyncio.fixture(scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    config = dev_config_on_free_ports(tmp_path_factory.mktemp("replay-check-server"))
    started = await start_or_reuse(config, stop_with_parent=True)
    try:
        yield started
    finally:
        started.stop()


@pytest_asyncio.fixture(scope="module")
async def client(server: DevServer) -> Client:
    return await Client.connect(
        server.address, namespace=server.namespace, data_converter=pydantic_data_converter
    )


@pytest_asyncio.fixture(scope="module")
async def real_runs(
    client: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[list[str]]:
    """Two real runs of the scripted agent in bubblewrap sandboxes: one finished, one still
    running (its agent holding its first checkpoint) while the tests look."""
    root = tmp_path_factory.mktemp("replay-check-runs")
    async with nothing_left_running(client) as started:
        async with in_process_worker(client, "replay-check") as queue:
            finished = scripted_spec(new_run_id("replay-done"), root, "last-words")
            held = scripted_spec(
                new_run_id("replay-open"), root, "last-words", env={"AGENT_HOLD": "600"}
            )
            for spec in (finished, held):
                await api.start_run(client, spec, task_queue=queue)
                started.append(spec.run_id)
            result = await asyncio.wait_for(api.wait_result(client, finished.run_id), 60)
            assert result.outcome == "finished"
            await _until_checkpointed(client, held.run_id)
        # The worker is gone; the open run stays open (as during a deploy), its history whole.
        yield list(started)


async def _until_checkpointed(client: Client, run_id: str) -> None:
    give_up = time.monotonic() + CAP  # a time cap, not 200 looks: load slows the agent
    while time.monotonic() < give_up:
        status = await api.get_status(client, run_id)
        if status.state == "running" and status.checkpoint_bytes:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{run_id} never reached a checkpoint: {status}")


async def check(server: DevServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("TEMPORAL_")}
    return await asyncio.to_thread(
        subprocess.run,
        [str(OVERNIGHT), "--address", server.address, "replay-check", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


async def test_real_runs_replay_and_an_incompatible_run_fails_the_check_by_name(
    server: DevServer, client: Client, real_runs: list[str]
) -> None:
    clean = await check(server, "--namespace", server.namespace, "--json")
    assert clean.returncode == 0, clean.stderr
    report = json.loads(clean.stdout)
    assert report["divergence"] is None
    assert report["replayed"] == len(real_runs) == 2
    assert report["by_type"] == {"AgentRun": 2}

    only_open = await check(server, "--since", "0")
    assert only_open.returncode == 0, only_open.stderr
    assert only_open.stdout.startswith("replayed 1 runs (open)"), only_open.stdout

    # A run made by a deploy that changed AgentRun without workflow.patched.
    odd_id = f"replay-odd-{uuid.uuid4().hex[:8]}"
    queue = f"replay-odd-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[DivergentAgentRun]):
        odd = await client.execute_workflow(
            "AgentRun", {"run_id": odd_id}, id=odd_id, task_queue=queue, result_type=str
        )
    assert odd == f"divergent {odd_id}"

    failed = await check(server, "--json")
    assert failed.returncode == 1, failed.stderr
    divergence = json.loads(failed.stdout)["divergence"]
    assert divergence["workflow_id"] == odd_id
    assert divergence["error_type"] == "NondeterminismError", divergence
    text = await check(server)
    assert text.returncode == 1
    assert text.stdout.startswith(f"run {odd_id} (run id "), text.stdout
    assert "does not replay on this code: NondeterminismError" in text.stdout


async def test_this_trees_runs_fail_on_an_incompatible_agent_run_naming_the_first(
    client: Client, real_runs: list[str]
) -> None:
    # One history fetched at a time: the check stops at the first divergence with the rest
    # still to fetch.
    report = await replay_check(
        client,
        since=timedelta(days=2),
        now=datetime.now(UTC),
        concurrency=1,
        workflows=[DivergentAgentRun],
    )
    assert report.divergence is not None
    assert report.divergence.workflow_id in real_runs
    assert report.divergence.workflow_type == "AgentRun"
    assert report.divergence.error_type == "NondeterminismError"


async def test_a_namespace_that_does_not_exist_is_one_line_and_exit_1(server: DevServer) -> None:
    done = await check(server, "--namespace", "no-such-namespace")
    assert done.returncode == 1
    assert done.stderr == (
        "overnight: the Temporal server says: Namespace no-such-namespace is not found: check "
        "--namespace or TEMPORAL_NAMESPACE\n"
    )
