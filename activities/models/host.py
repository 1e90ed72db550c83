"""The inputs and results of the host check (activities/admission/host_check.py), apart from
`activities.models` so that one stays small; the workflow imports them as it does those."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HostCheckInput(_Model):
    """Is the host behind `host_queue` still there? Asked on the shared queue."""

    host_queue: str


class HostSeen(_Model):
    """What the server says of a host queue's pollers (DescribeTaskQueue, activity type)."""

    host_queue: str
    pollers: int = Field(default=0, ge=0)
    # The latest any poller of the queue polled (None: the server lists none: none polled in
    # its poller history's last minutes, or the last one shut down gracefully).
    last_poll_at: datetime | None = None
    # The checking worker's `OVERNIGHT_HOST_LOST_SECONDS` (the same on every worker).
    lost_after_seconds: float
    checked_at: datetime
