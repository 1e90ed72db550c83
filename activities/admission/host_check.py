"""`check_host`: whether a host's task queue still has a poller (many hosts, overnight.core.hosts).

Asked on the shared queue by a run whose activity on its sandbox's host queue waited too long
to start. One DescribeTaskQueue (activity pollers) answers it; the answer is kept for a few
seconds, so the runs of one host that went away cost the checking worker one request per
`CACHE_SECONDS` between them, not one each.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from activities.errors import ErrorType, non_retryable
from activities.models import ActivityName
from activities.models.host import HostCheckInput, HostSeen
from overnight.core.host_settings import host_lost_seconds

CACHE_SECONDS = 2.0


class HostCheckActivities:
    def __init__(self, client: Client | None, lost_after_seconds: float | None = None) -> None:
        self._client = client
        self._lost_after = host_lost_seconds() if lost_after_seconds is None else lost_after_seconds
        self._seen: dict[str, tuple[float, HostSeen]] = {}
        self._lock = asyncio.Lock()

    def all(self) -> list[Callable[..., Any]]:
        return [self.check_host]

    @activity.defn(name=ActivityName.CHECK_HOST)
    async def check_host(self, input: HostCheckInput) -> HostSeen:
        async with self._lock:
            kept = self._seen.get(input.host_queue)
            if kept is not None and time.monotonic() - kept[0] < CACHE_SECONDS:
                return kept[1]
            seen = await self._describe(input.host_queue)
            self._seen[input.host_queue] = (time.monotonic(), seen)
            return seen

    async def _describe(self, queue: str) -> HostSeen:
        if self._client is None:
            raise non_retryable(ErrorType.INVALID_REQUEST, "this worker has no Temporal client")
        client = self._client
        described = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            )
        )
        polls = [
            p.last_access_time.ToDatetime(tzinfo=UTC)
            for p in described.pollers
            if p.HasField("last_access_time")
        ]
        return HostSeen(
            host_queue=queue,
            pollers=len(described.pollers),
            last_poll_at=max(polls, default=None),
            lost_after_seconds=self._lost_after,
            checked_at=datetime.now(UTC),
        )
