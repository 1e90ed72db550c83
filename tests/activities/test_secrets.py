"""A secret in `secret_env` reaches the agent and nothing else: not even when the agent prints
it, then its last words (kept in the run's status) and the notifications are redacted.

The secret's value is set only in a worker process's environment (`python worker.py`, as in
production); neither this test process nor the CLI ever has it. Runs on both providers
(`runtime` through the loopback fake Runtime API) are started with `overnight start --wait`.
Afterwards the value must appear in no workflow history of the namespace (payloads decoded),
no memo, search attribute or static summary, no worker or CLI output, and no file overnight
keeps; the agent proves it got the value by checkpointing its sha256.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest_asyncio
from temporalio.client import Client

from fakes.runtime import FakeRuntime
from overnight.core.grants import SECRET_ENV_ENV, WRITABLE_BIND_ROOTS_ENV
from overnight.worker.devserver import DevServer
from tests.chaos.stack import WorkerPool, worker_env
from tests.live import (
    history_text,
    new_run_id,
    nothing_left_running,
    running_sandboxes,
    scripted_spec,
    task_failures,
)
from tests.waits import CAP
from tests.webhook_receiver import Receiver

OVERNIGHT = Path(sys.executable).parent / "overnight"
SECRET_NAME = "OVERNIGHT_TEST_SECRET"


class SecretWorld:
    """A worker subprocess holding the secret, the fake Runtime API, and their state folders."""

    def __init__(self, root: Path, secret: str, fake: FakeRuntime, pool: WorkerPool) -> None:
        self.root = root
        self.secret = secret
        self.fake = fake
        self.pool = pool

    @property
    def local_home(self) -> Path:
        return self.root / "worker-home"

    @property
    def runtime_home(self) -> Path:
        return self.root / "runtime-home"

    @property
    def task_queue(self) -> str:
        return self.pool.task_queue


@pytest_asyncio.fixture(loop_scope="session")
async def world(dev_server: DevServer, tmp_path: Path) -> AsyncIterator[SecretWorld]:
    secret = f"s3cret-{secrets.token_hex(16)}"
    assert secret not in os.environ.values()
    async with FakeRuntime.local(tmp_path / "runtime-home") as fake:
        env = worker_env(
            dict(os.environ),
            {
                "TEMPORAL_ADDRESS": dev_server.address,
                "TEMPORAL_NAMESPACE": dev_server.namespace,
                "OVERNIGHT_HOME": str(tmp_path / "worker-home"),
                SECRET_NAME: secret,
                # What the worker lets specs ask for (overnight/core/grants.py): the secret, and
                # the origins bound writable.
                SECRET_ENV_ENV: SECRET_NAME,
                WRITABLE_BIND_ROOTS_ENV: str(tmp_path / "origins"),
                **fake.environ(tmp_path / "config"),
            },
        )
        pool = WorkerPool(1, env, new_run_id("secrets"), tmp_path)
        pool.start_all()
        try:
            await pool.wait_ready()
            yield SecretWorld(tmp_path, secret, fake, pool)
        finally:
            await asyncio.to_thread(pool.stop_all)


async def overnight_cli(server: DevServer, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a person runs it: its own process, without the worker's secret."""
    env = {k: v for k, v in os.environ.items() if k != SECRET_NAME}
    return await asyncio.to_thread(
        subprocess.run,
        [str(OVERNIGHT), "--address", server.address, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def files_holding(folder: Path, needle: bytes) -> list[Path]:
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if holds(path, needle):
                    found.append(path)
            except OSError:
                continue
    return found


def holds(path: Path, needle: bytes, chunk: int = 1 << 22) -> bool:
    """Whether `needle` is in the file, reading only its data: a sandbox's `disk.img` is a
    sparse file of many GiB whose holes (zeros) cannot hold it. Chunks overlap by the
    needle's length, so one split across two chunks is found."""
    with path.open("rb") as file:
        fd = file.fileno()
        end = os.fstat(fd).st_size
        offset = 0
        while offset < end:
            try:
                start = os.lseek(fd, offset, os.SEEK_DATA)
                stop = os.lseek(fd, start, os.SEEK_HOLE)
            except OSError:
                return False  # no data past `offset` (ENXIO)
            at = max(0, start - len(needle))
            while at < stop:
                file.seek(at)
                if needle in file.read(min(chunk, stop - at) + len(needle)):
                    return True
                at += chunk
            offset = stop
    return False


def test_holds_finds_a_needle_past_a_hole_and_across_a_chunk_edge(tmp_path: Path) -> None:
    sparse = tmp_path / "disk.img"
    with sparse.open("wb") as file:
        file.seek(64 << 20)  # a 64 MiB hole first
        file.write(b"x" * 10 + b"SECRET-VALUE" + b"y" * 10)
        file.truncate(128 << 20)  # and one after
    assert holds(sparse, b"SECRET-VALUE", chunk=16)  # split over two 16-byte chunks
    assert holds(sparse, b"SECRET-VALUE")
    assert not holds(sparse, b"OTHER-VALUE")
    assert not holds(tmp_path / "disk.img", b"\0" * 8 + b"Z")


def touched_from_now() -> str:
    """A visibility query for every workflow a test begun now can touch: started since (a
    little slack for clocks), or still running. Not the whole namespace: the session's dev
    server holds hundreds of other tests' runs, each a history to fetch (a minute of the
    suite)."""
    since = (datetime.now(UTC) - timedelta(seconds=5)).isoformat()
    return f'StartTime >= "{since}" OR ExecutionStatus = "Running"'


async def test_a_secret_reaches_the_agent_and_appears_nowhere_else(
    dev_server: DevServer, dev_client: Client, world: SecretWorld
) -> None:
    secret = world.secret
    outputs: list[str] = []
    touched = touched_from_now()
    async with nothing_left_running(dev_client, [world.local_home, world.runtime_home]) as runs:
        starts = []
        for provider in ("local", "runtime"):
            run_id = new_run_id(f"secret-{provider}")
            runs.append(run_id)
            spec = scripted_spec(
                run_id,
                world.root / "origins",
                "secret-proof",
                provider=provider,
                secret_env=[SECRET_NAME],
                env={"AGENT_SECRET_NAME": SECRET_NAME},
            )
            spec_file = world.root / f"{run_id}.json"
            spec_file.write_text(spec.model_dump_json())
            starts.append(
                overnight_cli(
                    dev_server,
                    "start",
                    str(spec_file),
                    "--wait",
                    "--json",
                    "--task-queue",
                    world.task_queue,
                )
            )
        done = await asyncio.gather(*starts)
        for finished in done:
            assert finished.returncode == 0, finished.stderr
            outputs += [finished.stdout, finished.stderr]
        for run_id in runs:
            for args in (("status", run_id, "--json"), ("status", run_id)):
                shown = await overnight_cli(dev_server, *args)
                assert shown.returncode == 0, shown.stderr
                outputs += [shown.stdout, shown.stderr]
        listed = await overnight_cli(dev_server, "list", "--json")
        outputs += [listed.stdout, listed.stderr]

        # The agent got the value: its checkpoint holds the value's hash.
        proof = hashlib.sha256(secret.encode()).hexdigest()
        for finished in done:
            result = json.loads(finished.stdout)["result"]
            assert result["outcome"] == "finished"
            assert json.loads(result["checkpoint"])["secret_sha256"] == proof

        # No history in the namespace holds it, payloads decoded; nor memo, attributes, summary.
        # (The search sees inside payloads: the proof, which is in the result, is found.)
        assert proof in await history_text(dev_client, runs[0])
        seen = set()
        async for execution in dev_client.list_workflows(touched):
            seen.add(execution.id)
            assert secret not in await history_text(dev_client, execution.id), execution.id
            assert secret not in repr(execution.typed_search_attributes)
            description = await dev_client.get_workflow_handle(execution.id).describe()
            assert secret not in repr(description.typed_search_attributes)
            assert secret not in repr(await description.memo())
            summary = f"{await description.static_summary()} {await description.static_details()}"
            assert secret not in summary
        assert seen >= set(runs)
        for run_id in runs:
            assert await task_failures(dev_client, run_id) == []

    # Nor any output, nor any file overnight or the fake keeps (logs, launch records, state).
    for text in outputs:
        assert secret not in text
    log = "".join(w.log_file.read_text(errors="replace") for w in world.pool.workers)
    assert "worker polling task queue" in log
    assert secret not in log
    assert files_holding(world.root, secret.encode()) == []
    for run_id in runs:
        assert running_sandboxes(run_id, world.local_home) == []
        assert running_sandboxes(run_id, world.runtime_home) == []


async def test_a_secret_the_agent_prints_is_redacted_from_its_last_words_and_notifications(
    dev_server: DevServer, dev_client: Client, world: SecretWorld
) -> None:
    secret = world.secret
    outputs: list[str] = []
    touched = touched_from_now()
    with Receiver() as receiver:
        async with nothing_left_running(dev_client, [world.local_home, world.runtime_home]) as runs:
            starts = []
            for provider in ("local", "runtime"):
                run_id = new_run_id(f"loud-{provider}")
                runs.append(run_id)
                spec = scripted_spec(
                    run_id,
                    world.root / "origins",
                    "loud-crash",
                    provider=provider,
                    secret_env=[SECRET_NAME],
                    env={"AGENT_SECRET_NAME": SECRET_NAME},
                    budget={"max_restarts": 1},
                    notify=[{"url": receiver.url, "on_restart": True}],
                )
                spec_file = world.root / f"{run_id}.json"
                spec_file.write_text(spec.model_dump_json())
                starts.append(
                    overnight_cli(
                        dev_server,
                        "start",
                        str(spec_file),
                        "--wait",
                        "--json",
                        "--task-queue",
                        world.task_queue,
                    )
                )
            for finished in await asyncio.gather(*starts):
                assert finished.returncode == 0, finished.stderr
                outputs += [finished.stdout, finished.stderr]
            for run_id in runs:
                shown = await overnight_cli(dev_server, "status", run_id, "--json")
                outputs += [shown.stdout, shown.stderr]
                status = json.loads(shown.stdout)
                # The crash's last words are kept, the secret in them redacted by the worker.
                [record] = status["restarts"]
                assert "calling the API with token=***" in record["output_tail"]
                assert "RuntimeError: the API refused token ***" in record["output_tail"]
                assert status["last_words"]["tail"].endswith("all done")
            give_up = time.monotonic() + CAP
            while len(receiver.accepted) < 4 and time.monotonic() < give_up:
                await asyncio.sleep(0.2)
            seen = set()
            async for execution in dev_client.list_workflows(touched):
                seen.add(execution.id)
                assert secret not in await history_text(dev_client, execution.id), execution.id
            assert seen >= set(runs)
            # The agent's own output, in the crashed attempt's sandbox (kept paused for a look),
            # holds what it printed (as Runtime would keep it); nothing overnight copied out of
            # a sandbox, and no other file, does.
            holding = files_holding(world.root, secret.encode())
            assert holding, "the agent printed the secret"
            for path in holding:
                assert path.name == "output.log" and path.parent.parent.name == "processes", path
    # Once its sandboxes are stopped, they are gone, and what the agent printed with them.
    assert files_holding(world.root, secret.encode()) == []

    # Each run told of its restart (with the crash's last words) and of its end.
    by_run: dict[str, list[str]] = {}
    for got in receiver.accepted:
        by_run.setdefault(got.json["run_id"], []).append(got.event)
        assert secret.encode() not in got.body
    assert by_run == {run_id: ["restart", "finished"] for run_id in runs}
    restart = next(r.json for r in receiver.accepted if r.event == "restart")
    assert restart["output_tail"]["text"].endswith("RuntimeError: the API refused token ***")
    for text in outputs:
        assert secret not in text
    log = "".join(w.log_file.read_text(errors="replace") for w in world.pool.workers)
    assert secret not in log
