"""The baseline's worker: `NaiveAgentRun` plus overnight's own sandbox activities and one more
(`naive_get_process`), on the baseline's task queue, with the same providers."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from activities.errors import activity_errors
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import SandboxProvider
from activities.worker_activities import WorkerActivities
from bench.baseline import (
    BASELINE_TASK_QUEUE,
    GET_PROCESS,
    NaiveAgentRun,
    ProcessRef,
    ProcessSeen,
)
from overnight.worker.runner import MAX_CACHED_WORKFLOWS, MAX_CONCURRENT_ACTIVITIES, run_worker


class NaiveActivities:
    """The one step the baseline needs that overnight has no activity for: the process state."""

    def __init__(self, providers: Mapping[str, SandboxProvider]) -> None:
        self._providers = providers

    @activity.defn(name=GET_PROCESS)
    async def get_process(self, ref: ProcessRef) -> ProcessSeen:
        with activity_errors():
            seen = await self._providers[ref.provider].process(ref.sandbox_id, ref.process_id)
        return ProcessSeen(state=seen.state, exit_code=seen.exit_code)


async def serve_baseline(
    client: Client,
    *,
    task_queue: str = BASELINE_TASK_QUEUE,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
    providers: Mapping[str, SandboxProvider] | None = None,
    max_concurrent_activities: int = MAX_CONCURRENT_ACTIVITIES,
    max_cached_workflows: int = MAX_CACHED_WORKFLOWS,
) -> None:
    """Run the baseline's worker until `stop` is set, like `overnight.worker.runner.serve`."""
    providers = providers or {"local": LocalProvider()}
    async with WorkerActivities(client, providers=providers) as sandbox_activities:
        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=[NaiveAgentRun],
            activities=[*sandbox_activities.all(), NaiveActivities(providers).get_process],
            max_concurrent_activities=max_concurrent_activities,
            max_cached_workflows=max_cached_workflows,
        )
        await run_worker(worker, ready=ready, stop=stop)
