"""The models of making a sandbox and starting its agent (`create_sandbox` and `start_agent`,
activities/sandbox/activities.py): the create's and the start's inputs, and what both answer. Apart
from `activities.models` so that one stays small; it re-exports them."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from activities.models.checkpoint import CheckpointRead, OutputTail
from activities.models.money import DailyLimitRead
from activities.models.workspace import WorkspaceRestore, WorkspaceRestored
from overnight.core.models import RunSpec


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SnapshotRestore(_Model):
    """Make the new sandbox from this snapshot (when it is still ready) instead of clone +
    upload + checkpoint."""

    snapshot_id: str
    mode: str = "disk"
    # The agent's snapshot request it answered (answered again in the copy: a memory-mode
    # agent restored inside `snapshot_here()` goes on).
    request: int = 0
    # Memory mode: the start key of the agent captured running (adopted when it runs).
    adopt_start_key: str | None = None


class CreateSandboxInput(_Model):
    """Create sandbox `{run_id}-{attempt}` and start the agent in it, from `checkpoint`
    (or from `restore`, a snapshot)."""

    spec: RunSpec
    attempt: int = Field(ge=1)
    checkpoint: str | None = None
    restart_reason: str = ""
    # Runtime's own cap on the sandbox's lifetime cost: what is left of the spend budget.
    max_total_cost_micros: int | None = Field(default=None, gt=0)
    restore: SnapshotRestore | None = None
    # What its first lease costs: the key's daily spending limit must still cover it, else
    # the create is refused (`DailySpendingLimit`) before anything is made.
    lease_cost_micros: int | None = Field(default=None, ge=0)
    # The run keeps its sandboxes' hosts (workflows.pure.hosts): say this host's queue in the
    # answer. Only then, so a run begun before never meets fields it does not know.
    wants_host: bool = False
    # The workspace kept at a checkpoint, put in the fresh clone (`RunSpec.keep_workspace`).
    workspace: WorkspaceRestore | None = None
    # The run's allowance for model calls (its spend budget less its sandboxes' cost; None: no
    # budget) and what each host's gateway booked to it (by host queue, "" for a run's one
    # worker): the sandbox's gateway caps it at the allowance less the other hosts' books.
    model_allowance_usd: float | None = None
    model_booked_by_host: dict[str, float] = Field(default_factory=dict)


class AgentStarted(_Model):
    sandbox_id: str
    process_id: str
    # False when a retried activity found the sandbox or the agent already there.
    created: bool = True
    # When the new sandbox's lease ends (None: no time limit, or not known).
    lease_ends_at: datetime | None = None
    # How the sandbox is isolated and limited, said plainly for the status and the Web UI
    # card (the local provider fills it; e.g. "not isolated (isolation: none)").
    isolation: str | None = None
    # A start in the same sandbox: the last words of the agent it replaces (when asked).
    previous_output: OutputTail | None = None
    # The snapshot the sandbox was made from (None: from the checkpoint), and whether the
    # agent captured running in it was adopted (memory mode) rather than started.
    restored_from: str | None = None
    adopted: bool = False
    # The key's daily spending limit as read before the create (None: not read).
    daily: DailyLimitRead | None = None
    # A sandbox of a host-bound provider (local): the task queue of the host that made it,
    # where every later activity on it goes, and that host's `OVERNIGHT_HOST_LOST_SECONDS`
    # (overnight.core.hosts). None: any worker reaches it (Runtime), or a worker from before.
    host_queue: str | None = None
    host_lost_seconds: float | None = None
    # Runs that keep their workspace: the commit the clone's branch was at, what became of
    # the kept workspace it was given, and (a rewind) the checkpoint restored with it.
    workspace_base: str | None = None
    workspace_restored: WorkspaceRestored | None = None
    checkpoint_restored: CheckpointRead | None = None


class StartAgentInput(_Model):
    """Start the agent again in an existing sandbox (a fresh-context start)."""

    spec: RunSpec
    sandbox_id: str
    attempt: int = Field(ge=1)
    fresh_start: int = Field(ge=0)
    restart_reason: str = ""
    # The agent's pause ended it (a sandbox with no cgroup to freeze): the how-many-th start
    # after such a pause (0: a fresh-context start), in the start key.
    resumed: int = Field(default=0, ge=0)
    # The agent process that just ended (its last words are read before the new start).
    output_of: str | None = None
    secret_env: list[str] = Field(default_factory=list)
    # A start after a failed done check: the how-many-th such start in this sandbox (0: none),
    # in the start key.
    done_round: int = Field(default=0, ge=0)
    # A start after a failing CI check (overnight/core/ci_rounds.py): the round (0: none), in the
    # start key, and what the agent is told, written to `DONE_CHECK_FILE` before it starts.
    ci_round: int = Field(default=0, ge=0)
    told: str = ""
