"""The models of watching an agent (`observe_agent`, activities/sandbox/observe.py: a long poll):
what to watch, and what a look found, with the states a sandbox and its agent's process may
be in. Apart from `activities.models` so that one stays small; it re-exports them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from activities.models.checkpoint import CheckpointRead, RequestsRead
from activities.models.money import GatewayBooks, MoneyRead
from overnight.core.models import Provider

SandboxState = Literal["starting", "running", "paused", "stopped", "missing"]
ProcessState = Literal["running", "exited", "killed", "missing"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ObserveInput(_Model):
    """Watch the agent until something changes or `wait_seconds` pass (a long poll)."""

    provider: Provider
    sandbox_id: str
    process_id: str
    checkpoint_path: str
    max_checkpoint_bytes: int = Field(gt=0)
    known_digest: str | None = None
    wait_seconds: float = Field(ge=0)
    # Kept for histories recorded before watching: providers pick their own look interval.
    check_interval_seconds: float = Field(default=1.0, gt=0)
    # Where the previous observe left the provider's watch (opaque), so nothing is missed.
    watch_token: str | None = None
    # A changed checkpoint is handed over at most this often (exits and stops at once).
    report_every_seconds: float = Field(default=0, ge=0)
    # Read what the sandbox has cost so far, and the key's daily limit, before answering.
    read_money: bool = False
    # The run's secret variables: their values are redacted from the checkpoint in the worker.
    secret_env: list[str] = Field(default_factory=list)
    # The kit's requests file, watched with the checkpoint (None: runs begun before it), and
    # the digest of its version last seen.
    requests_path: str | None = None
    known_requests_digest: str | None = None
    # As in ReadCheckpointInput: where a changed checkpoint's session file is carried to.
    session_store_of: str | None = None
    # The run whose model calls the sandbox's host booked: read them (None: runs begun before),
    # news when they differ from what the run knows of that host's books.
    model_books_of: str | None = None
    known_model_books: GatewayBooks | None = None


class Observation(_Model):
    process_state: ProcessState
    exit_code: int | None = None
    sandbox_state: SandboxState
    stop_reason: str | None = None
    # Why the sandbox paused, when it is paused and its provider says (see SandboxInfo).
    pause_reason: str | None = None
    # None when the checkpoint did not change since `known_digest`.
    checkpoint: CheckpointRead | None = None
    lease_ends_at: datetime | None = None
    watch_token: str | None = None
    # When asked (`read_money`): the sandbox's charges and the key's daily limit.
    money: MoneyRead | None = None
    # The kit's requests file, when it changed since `known_requests_digest`.
    requests: RequestsRead | None = None
    # Connections the sandbox's network refused so far, per host asked for (None: its
    # provider does not tell).
    egress_refused: dict[str, int] | None = None
    # What the sandbox's host's gateway booked to the run (when asked and it serves models).
    gateway_books: GatewayBooks | None = None
