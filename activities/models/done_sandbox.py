"""The models of the done check's own sandbox (activities/delivery/done_sandbox.py): one in, one
out."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from overnight.core.models import RunSpec


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PrepareDoneCheckInput(_Model):
    """Push the agent's work from `agent_sandbox_id` to the run's check ref `number`, confirm
    it on the origin, and make check sandbox `number` with a clean clone at that commit."""

    spec: RunSpec
    agent_sandbox_id: str
    number: int = Field(ge=1)
    # The round of the done check (for the file that tells the agent of a failure).
    round: int = Field(ge=1)
    # The commit's date (the workflow's time, so a retried push makes the same commit).
    at: datetime
    # The latest commit of the run's already on the origin (its objects are not counted).
    previous: str | None = None
    # The check sandbox's lease (it stops at its end: nothing in it is worth keeping).
    timeout_seconds: float = Field(gt=0)
    max_total_cost_micros: int | None = Field(default=None, ge=0)
    lease_cost_micros: int | None = Field(default=None, ge=0)


class DoneCheckSandbox(_Model):
    """The check sandbox made, at `commit`; or why the work could not be checked
    (`problem`: no sandbox was made, and the agent was told)."""

    sandbox_id: str | None = None
    ref: str = ""
    commit: str | None = None
    lease_ends_at: datetime | None = None
    problem: str = ""
    # Seconds spent pushing (in the agent's sandbox) and making the check sandbox ready.
    push_seconds: float = 0
    ready_seconds: float = 0
