"""`overnight start` says what the worker says (issue 51): the real CLI, as a subprocess, against
the session's dev server and a worker in this process. A run the worker refuses, or that fails
at its first create, makes `start` exit 2 with the worker's one line; a run whose agent starts
makes it exit 0 saying so; `--no-wait` returns at once, as `start` did before."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from temporalio.client import Client

from overnight.cli.start_look import WAIT_ENV, after_the_wait, verdict
from overnight.core.grants import Grants
from overnight.core.models import Budget, RunStatus
from overnight.demo.sample_demo import make_origin
from overnight.worker.devserver import DevServer
from tests.cli.test_cli import OVERNIGHT
from tests.cli.test_start_grants import GRANT_SETTINGS
from tests.live import (
    SCRIPTED_AGENT,
    SCRIPTED_COMMAND,
    in_process_worker,
    new_run_id,
    nothing_left_running,
)

AGAIN = "no retry can fix this: fix the spec (or the worker) and start the run again"


def _spec(run_id: str, origins: Path, **changes: Any) -> dict[str, Any]:
    origin = make_origin(origins / run_id).origin
    return {
        "run_id": run_id,
        "repo": str(origin),
        "agent_dir": str(SCRIPTED_AGENT),
        "command": SCRIPTED_COMMAND,
        "env": {"AGENT_MODE": "last-words", "AGENT_HOLD": "120"},
        "poll_seconds": 1,
        "stall_seconds": 300,
        "sandbox_timeout_seconds": 300,
        **changes,
    }


async def _start(
    server: DevServer, folder: Path, spec: dict[str, Any], queue: str, *flags: str
) -> subprocess.CompletedProcess[str]:
    path = folder / f"{spec['run_id']}.json"
    path.write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if k not in GRANT_SETTINGS}
    # The look's bound, long enough that a busy machine's slow create cannot end it first.
    env[WAIT_ENV] = "120"
    return await asyncio.to_thread(
        subprocess.run,
        [str(OVERNIGHT), "--address", server.address, "start", str(path)]
        + ["--task-queue", queue, *flags],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )


async def test_start_exits_2_with_the_workers_line_for_a_run_refused_or_failing_at_start(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    origins = tmp_path / "origins"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    no_agent_dir, bind = new_run_id("no-agent"), new_run_id("bind")
    specs = [
        _spec(no_agent_dir, origins, agent_dir=str(tmp_path / "nowhere")),
        _spec(bind, origins, binds=[{"path": str(elsewhere), "writable": True}]),
    ]
    grants = Grants(writable_bind_roots=(str(origins),))
    async with (
        nothing_left_running(dev_client) as runs,
        in_process_worker(dev_client, "start-says", grants=grants) as queue,
    ):
        runs += [spec["run_id"] for spec in specs]
        done = await asyncio.gather(*(_start(dev_server, tmp_path, s, queue) for s in specs))
    for spec, started in zip(specs, done, strict=True):
        assert started.returncode == 2, (spec["run_id"], started.stdout, started.stderr)
        assert started.stdout.startswith(f"started {spec['run_id']}\n"), started.stdout
    said = [started.stderr.strip().splitlines() for started in done]
    [agent_dir_line], [bind_line] = said
    assert agent_dir_line == (
        f"overnight: run {no_agent_dir} cannot start: field agent_dir: {tmp_path}/nowhere is not "
        f"a folder on this worker; {AGAIN}"
    )
    assert bind_line.startswith("overnight: spec: field binds: "), bind_line
    assert "OVERNIGHT_WRITABLE_BIND_ROOTS" in bind_line, bind_line


async def test_start_exits_0_saying_the_agent_runs_and_no_wait_returns_at_once(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    running, refused = new_run_id("says-ok"), new_run_id("no-wait")
    origins = tmp_path / "origins"
    async with (
        nothing_left_running(dev_client) as runs,
        in_process_worker(dev_client, "start-ok") as queue,
    ):
        runs += [running, refused]
        started = await _start(dev_server, tmp_path, _spec(running, origins), queue)
        assert started.returncode == 0, started.stderr
        lines = started.stdout.splitlines()
        assert lines[0] == f"started {running}"
        assert lines[-1] == (
            f"{running} is running (attempt 1, sandbox {running}-1): "
            f"overnight logs {running} --follow"
        )
        # --no-wait: started, and nothing of the worker's word (its refusal comes after).
        bad = _spec(refused, origins, agent_dir=str(tmp_path / "nowhere"))
        quick = await _start(dev_server, tmp_path, bad, queue, "--no-wait", "--json")
        assert quick.returncode == 0, quick.stderr
        assert json.loads(quick.stdout)["run_id"] == refused


def _status(**fields: Any) -> RunStatus:
    return RunStatus.model_validate(
        {"run_id": "r", "attempt": 0, "budget": Budget(), "started_at": "2026-01-01T00:00:00Z"}
        | fields
    )


def test_what_start_says_when_its_wait_ends_without_the_workers_word() -> None:
    no_worker = after_the_wait("r", None, worker_took_it=False, task_queue="overnight")
    assert no_worker.going and no_worker.line == (
        "r: no worker has taken it yet: is one polling task queue 'overnight'? "
        "(overnight dev runs one)"
    )
    waits = after_the_wait(
        "r",
        _status(state="starting", waiting_on="create: the host's disk is low\x1b[2J"),
        worker_took_it=True,
        task_queue="q",
    )
    assert waits.going
    assert waits.line == (
        "r is still starting: create: the host's disk is low\\x1b[2J (overnight status r)"
    )
    assert verdict("r", _status(state="starting")) is None
    attention = verdict("r", _status(state="needs_attention", attention_reason="chmod o+rwx /x"))
    assert attention is not None and not attention.going and attention.bad_input
    assert attention.line == "run r needs you: chmod o+rwx /x (overnight status r)"
