"""Encrypted payloads end to end: a real run under OVERNIGHT_CODEC_KEYS on the dev server.

The worker, the `overnight` CLI and the Python client helpers all encrypt; the history as the
server holds it (fetched by a client without the codec) shows no checkpoint text, no spec and
no agent output; after a key rotation (`b,a`) the same run is read and steered on; a client
that lacks the new key is told which key id it lacks.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from temporalio.client import Client

from overnight.cli import client as api
from overnight.core.codec import CODEC_KEYS_ENV, data_converter, parse_keys
from overnight.core.models import BudgetExtension, RunStatus
from overnight.worker.devserver import DevServer
from overnight.worker.runner import serve
from tests.e2e.helpers import agent_spec, new_run_id, wait_for_status
from tests.live import granted, history_text
from tests.waits import CAP

OVERNIGHT = Path(sys.executable).parent / "overnight"
KEY_A = f"a:{base64.b64encode(os.urandom(32)).decode()}"
KEY_B = f"b:{base64.b64encode(os.urandom(32)).decode()}"
ROTATED = f"{KEY_B},{KEY_A}"
# Steps 1 and 2 checkpoint (step 2's note names the migration), then the agent sits in step 3.
AGENT_ENV = {"AGENT_STEP_DELAY": "0.2", "AGENT_STALL_AT": "3"}
# What the checkpoint, the spec and the agent's output say, that the server must never see.
PLAINTEXT = ("add_due_date", "write the migration", "run the tests", "workspace/agent/main.py")


async def codec_client(server: DevServer, keys: str) -> Client:
    return await Client.connect(
        server.address, namespace=server.namespace, data_converter=data_converter(parse_keys(keys))
    )


@asynccontextmanager
async def codec_worker(client: Client, queue: str) -> AsyncIterator[None]:
    """A worker with `client`'s codec polling `queue` for the block."""
    ready, stop = asyncio.Event(), asyncio.Event()
    worker = asyncio.create_task(
        serve(client, task_queue=queue, ready=ready, stop=stop, grants=granted())
    )
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({worker, waiter}, timeout=CAP, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if worker.done():
        worker.result()
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(worker, timeout=60)


async def overnight(server: DevServer, keys: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OVERNIGHT_UI_URL": server.ui_url, CODEC_KEYS_ENV: keys}
    return await asyncio.to_thread(
        subprocess.run,
        [str(OVERNIGHT), "--address", server.address, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def at_step_3(status: RunStatus) -> bool:
    return (
        status.checkpoint_summary is not None and status.checkpoint_summary.next == "run the tests"
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_an_encrypted_run_is_driven_by_every_command_across_a_key_rotation(
    dev_server: DevServer, dev_client: Client, tmp_path: Path, runs: list[str]
) -> None:
    run_id = new_run_id("codec")
    runs.append(run_id)
    queue = f"codec-{uuid.uuid4().hex[:8]}"
    spec, _ = agent_spec(run_id, tmp_path, agent_env=AGENT_ENV, stall_seconds=300)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.model_dump_json())

    with_a = await codec_client(dev_server, KEY_A)
    async with codec_worker(with_a, queue):
        started = json.loads(
            ok(
                await overnight(
                    dev_server, KEY_A, "start", str(spec_file), "--json", "--task-queue", queue
                )
            )
        )
        assert started["run_id"] == run_id
        await wait_for_status(with_a, run_id, at_step_3, timeout=60)
        human = ok(await overnight(dev_server, KEY_A, "status", run_id))
        assert f"{run_id}: running, attempt 1" in human and "run the tests" in human
        listed = json.loads(ok(await overnight(dev_server, KEY_A, "list", "--json")))
        assert run_id in [entry["run_id"] for entry in listed]
        ok(await overnight(dev_server, KEY_A, "extend", run_id, "--restarts", "1"))
        await wait_for_status(with_a, run_id, lambda s: s.budget.max_restarts == 6)
        # logs reads the spec from the history's start event: through the codec.
        logs = ok(await overnight(dev_server, KEY_A, "logs", run_id))
        assert "step 2 (write the migration)" in logs

    # Rotation: the new key first, the old one still read. A new worker replays the whole
    # history written under `a`, and what it writes now is under `b`.
    rotated = await codec_client(dev_server, ROTATED)
    async with codec_worker(rotated, queue):
        status = await wait_for_status(
            rotated, run_id, lambda s: s.budget.max_restarts == 6, timeout=60
        )
        assert status.state == "running" and at_step_3(status)
        budget = await api.extend_budget_and_wait(rotated, run_id, BudgetExtension(hours=1))
        assert budget.max_hours == spec.budget.max_hours + 1
        as_json = json.loads(ok(await overnight(dev_server, ROTATED, "status", run_id, "--json")))
        assert as_json["budget"]["max_hours"] == budget.max_hours

        # A client still on `a` alone is told which key id it lacks, in one line, no key.
        stale = await overnight(dev_server, KEY_A, "status", run_id)
        assert stale.returncode == 1
        assert "key id 'b'" in stale.stderr and stale.stderr.count("\n") == 1
        assert KEY_A.split(":")[1] not in stale.stderr

        ok(await overnight(dev_server, ROTATED, "cancel", run_id, "--reason", "codec test over"))
        result = await asyncio.wait_for(api.wait_result(rotated, run_id), timeout=60)
        assert result.outcome == "cancelled"
        assert "add_due_date" in result.checkpoint

    # The history as the server holds it, read without the codec: ciphertext and key ids only.
    raw = await history_text(dev_client, run_id)
    for text in PLAINTEXT:
        assert text not in raw, f"{text!r} is in the raw history"
    assert "binary/encrypted" in raw and "OvernightState" in raw  # search attributes: by design


async def test_schedules_and_a_bad_key_configuration_with_the_codec(
    dev_server: DevServer, tmp_path: Path
) -> None:
    spec, _ = agent_spec("unused", tmp_path)
    spec_file = tmp_path / "scheduled.json"
    spec_file.write_text(json.dumps(spec.model_dump(mode="json", exclude={"run_id", "branch"})))
    name = f"codec-{uuid.uuid4().hex[:6]}"
    ok(
        await overnight(
            dev_server, KEY_A, "schedule", "create", name, str(spec_file), "--every", "1d"
        )
    )
    try:
        described = json.loads(
            ok(await overnight(dev_server, KEY_A, "schedule", "describe", name, "--json"))
        )
        assert described["when"] == "every 1d"  # the memo, decoded
        # The schedule's note is plaintext on the server: no command in it.
        assert described["note"] == "created by overnight"
    finally:
        ok(await overnight(dev_server, KEY_A, "schedule", "delete", name))

    bad = await overnight(dev_server, "a:notakey", "list")
    assert bad.returncode == 2
    assert (
        bad.stderr
        == f"overnight: {CODEC_KEYS_ENV}: entry 1 (id 'a'): the key is not valid base64\n"
    )
