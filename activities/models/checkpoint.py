"""The models of reading a sandbox's checkpoint (activities.sandbox_base.checkpoints): the input,
the file as found, the kit's requests file read with it, and the agent's last words salvaged at an
attempt's end. Apart from `activities.models` so that one stays small; it re-exports them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from overnight.core.agent_requests import AgentRequests
from overnight.core.checkpoint_text import CheckpointFacts
from overnight.core.models import Provider

CheckpointStatus = Literal["ok", "unchanged", "missing", "too_large", "unreadable", "outside"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OutputTail(_Model):
    """The last lines of an agent's output (~40 lines / 4 KiB), secret values redacted."""

    text: str
    # Earlier output was left out.
    truncated: bool = False


class CheckpointRead(_Model):
    """The checkpoint file as found. `text` is set only when `status == "ok"`.

    `digest` (sha256 of the raw bytes) is set whenever the bytes were read or could be
    fingerprinted, so the workflow can ask for "only if changed" next time.
    """

    status: CheckpointStatus
    digest: str | None = None
    size: int = 0
    text: str | None = None
    detail: str = ""
    # What the text says, read in the worker with limits (None: reads recorded before it was
    # sent; the workflow then reads the text itself, with the same limits).
    facts: CheckpointFacts | None = None


class RequestsRead(_Model):
    """The agent kit's requests file as found (activities.sandbox.requests_file): what it asks, read
    in the worker with the checkpoint's limits and redacted; its text stays in the worker.
    `requests` is None when the file holds none (missing, unchanged, or refused whole: then
    `refused` says why)."""

    status: CheckpointStatus
    digest: str | None = None
    requests: AgentRequests | None = None
    refused: str | None = None


class ReadCheckpointInput(_Model):
    provider: Provider
    sandbox_id: str
    checkpoint_path: str
    max_bytes: int = Field(gt=0)
    known_digest: str | None = None
    # Wake a sandbox paused at its lease end to salvage its checkpoint (Runtime wakes it on
    # the read anyway; asking says it is meant). Otherwise a paused sandbox is not read.
    wake_paused: bool = False
    # The agent process whose last words (the tail of its output) to read too, and the names
    # of the run's secret variables, whose values are redacted from them in the worker.
    output_of: str | None = None
    secret_env: list[str] = Field(default_factory=list)
    # The kit's requests file to read too (None: runs begun before it, which read none), and
    # the digest of its version last seen.
    requests_path: str | None = None
    known_requests_digest: str | None = None
    # A coding agent on Runtime: the run whose session store (on the worker) takes the
    # session file the checkpoint names (activities.coding_agent.sessions); None: none.
    session_store_of: str | None = None


class CheckpointSalvage(CheckpointRead):
    """What `read_checkpoint` salvages from a sandbox at an attempt's end: the checkpoint,
    and (when asked, best effort) the agent's last words and the kit's requests file."""

    output_tail: OutputTail | None = None
    requests: RequestsRead | None = None
