"""AgentRun's metrics (workflows/metrics.py): counted once when the run happens, never again
when its history is replayed (a worker restart, a deploy, a cache eviction).

A worker with no workflow cache replays a run's whole history on each workflow task; its
Temporal runtime serves Prometheus metrics on a free port, whose /metrics text is read back.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from fakes.activities import FakeWorld, exits, progress
from overnight.core.models import RunResult
from overnight.worker import binaries
from tests.conftest import free_port
from tests.waits import CAP
from tests.workflows.harness import make_spec
from workflows.agent_run import AgentRun
from workflows.metrics import restart_cause


@pytest.mark.parametrize(
    ("reason", "cause"),
    [
        ("agent crashed (exit 3)", "crashed"),
        ("agent stalled 15 min", "stalled"),
        ("agent was killed", "killed"),
        ("agent process is gone", "process_gone"),
        ("fresh-context starts used up (50)", "fresh_starts_used_up"),
        ("could not start the agent again: boom", "start_failed"),
        ("sandbox stopped answering (timeout)", "sandbox_unresponsive"),
        ("sandbox was paused from outside", "paused_from_outside"),
        ("sandbox paused at its lease end and could not be woken", "lease_end"),
        ("sandbox time limit reached", "time_limit"),
        ("sandbox stopped (oom)", "sandbox_stopped"),
        ("sandbox disappeared", "sandbox_gone"),
        ("host lost: build-7 (its queue had no worker for 180 s)", "host_lost"),
        ("sandbox 3 ended before the agent started", "sandbox_ended_early"),
        ("resumed after the budget was extended", "budget_extended"),
        ("daily spending window reopened", "daily_window"),
        ("something new", "other"),
    ],
)
def test_restart_reasons_become_few_causes(reason: str, cause: str) -> None:
    assert restart_cause(reason) == cause


class Scraped:
    def __init__(self, address: str) -> None:
        self.address = address

    def text(self) -> str:
        with urllib.request.urlopen(f"http://{self.address}/metrics", timeout=CAP) as answer:
            text: str = answer.read().decode()
        return text

    def overnight_lines(self) -> list[str]:
        """overnight's samples, without the task queue (each run has its own)."""
        return sorted(
            re.sub(r'task_queue="[^"]*",?', "", line)
            for line in self.text().splitlines()
            if line.startswith("overnight_")
        )

    def value(self, name: str, **labels: str) -> float:
        total = 0.0
        for line in self.text().splitlines():
            if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total


@pytest_asyncio.fixture(loop_scope="session")
async def metered() -> AsyncIterator[tuple[WorkflowEnvironment, Scraped]]:
    address = f"127.0.0.1:{free_port()}"
    runtime = Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=address)))
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=str(binaries.test_server_path()),
        runtime=runtime,
    )
    try:
        yield env, Scraped(address)
    finally:
        await env.shutdown()


async def test_a_run_is_counted_once_though_each_task_replays_its_history(
    metered: tuple[WorkflowEnvironment, Scraped],
) -> None:
    env, scraped = metered
    world = FakeWorld()
    world.script(1, [progress("cp-1"), exits(1)])
    world.script(2, [progress("cp-2"), exits(0)])
    spec = make_spec()
    # No workflow cache: every workflow task replays the run's history from its start.
    async with Worker(
        env.client,
        task_queue=spec.run_id,
        workflows=[AgentRun],
        activities=world.activities(),
        max_cached_workflows=0,
    ):
        handle = await env.client.start_workflow(
            "AgentRun", spec, id=spec.run_id, task_queue=spec.run_id, result_type=RunResult
        )
        result = await handle.result()
        history = await handle.fetch_history()

    assert (result.attempts, result.restarts) == (2, 1)
    tasks = [e for e in history.events if e.HasField("workflow_task_completed_event_attributes")]
    assert len(tasks) >= 5, "enough tasks that replays would show"
    assert scraped.value("temporal_workflow_task_replay_latency_count") >= len(tasks) - 1
    assert scraped.value("overnight_restarts_total", cause="crashed", counted="true") == 1
    for state in ("starting", "restarting", "finishing", "finished"):
        assert scraped.value("overnight_run_transitions_total", state=state) == 1, state
    assert scraped.value("overnight_run_transitions_total", state="running") == 2
