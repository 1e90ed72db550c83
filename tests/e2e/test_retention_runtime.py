"""What a finished run leaves for the morning, on the runtime provider (the real SDK against
the strict fake Runtime API): after a run that crashed once and then finished, `overnight logs
RUN --attempt 1` prints the crashed attempt's output from its sandbox, kept paused with Runtime's
own `:retention` set so Runtime never deletes it before its keep-until label; the result says
what the restart cost."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.providers.local.engine import LocalEngine
from fakes.runtime import FakeRuntime
from overnight.cli import client as api
from overnight.core.constants import LABEL_KEEP_UNTIL
from overnight.core.retention import parse_label
from overnight.worker.devserver import DevServer
from tests.e2e.test_operator import overnight_cli
from tests.live import in_process_worker, new_run_id, nothing_left_running, scripted_spec


@pytest.mark.timeout(180)
async def test_logs_of_a_finished_runtime_runs_crashed_attempt_come_from_its_kept_sandbox(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    runtime_home = tmp_path / "runtime-home"
    engine = LocalEngine(runtime_home)
    run_id = new_run_id("rtkept")
    spec = scripted_spec(
        run_id, tmp_path, "loud-crash", provider="runtime", env={"AGENT_HOLD": "0.2"}
    )
    with pytest.MonkeyPatch.context() as env:
        async with (
            FakeRuntime.local(runtime_home) as fake,
            nothing_left_running(dev_client, [runtime_home]) as runs,
            in_process_worker(dev_client, "rtkept") as queue,
        ):
            fake.use(env, tmp_path / "config")
            runs.append(run_id)
            await api.start_run(dev_client, spec, task_queue=queue)
            result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=90)
            assert (result.outcome, result.attempts) == ("finished", 2)
            net = result.safety_net
            assert net is not None and net.restarts == 1 and net.by_cause == {"crashed": 1}

            crashed = fake.sandbox_named(f"{run_id}-1")
            assert crashed is not None and engine.get(crashed).state == "paused"
            until = parse_label(engine.get(crashed).labels.get(LABEL_KEEP_UNTIL))
            assert until is not None
            days = fake.retention_days(crashed)
            assert days is not None and 3 <= days <= 4
            made = engine.get(crashed).created_at
            assert made + days * 86400 >= until.timestamp()

            logged = await overnight_cli(
                dev_server, "logs", run_id, "--attempt", "1", env=fake.environ(tmp_path / "config")
            )
            assert logged.returncode == 0, logged.stderr
            assert logged.stdout.splitlines()[0] == "working: line 1 of the first attempt"
            assert "RuntimeError: the API refused token" in logged.stdout
            assert "has no sandbox" not in logged.stderr
            assert engine.get(crashed).state == "paused"  # read, and left paused
            assert datetime.now(UTC) < until
