"""What the `status` query answers (`RunStatus`) and the records it is made of: the
restarts, the agent's last words, the snapshots, the checkpoint's summary, the daily limit.

Each is written into workflow history as plain data; their field names and defaults are
what recorded histories and older clients read, so they change only by adding fields with
defaults. `overnight.core.models` re-exports them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from overnight.core.agent_requests import AgentTalk, RunOutputs
from overnight.core.ci_rounds import CiView
from overnight.core.done_check import DoneCheck
from overnight.core.model_base import Budget, RunState, _Strict
from overnight.core.run_costs import SafetyNet
from overnight.core.workspace_spec import WorkspaceView


class RestartRecord(_Strict):
    attempt: int
    reason: str
    at: datetime
    sandbox_id: str | None = None
    # The ended attempt's last output lines (secret values redacted); kept on recent records.
    output_tail: str | None = None
    # When the run last saw the ended attempt progress (its time paused at lease ends left
    # out): a stall's deadline is this plus `stall_seconds`.
    last_progress_at: datetime | None = None


class LastWords(_Strict):
    """The tail of an agent's output when it ended (stdout and stderr together, at most ~40
    lines / 4 KiB, every value of the run's `secret_env` replaced by `***`)."""

    attempt: int
    # 0 for the attempt's first agent; n for its n-th fresh-context start.
    fresh_start: int = 0
    # Why it ended: a restart reason, "finished", "context window full", "cancelled", ...
    reason: str
    at: datetime
    tail: str
    # Earlier output was left out (more than the tail holds).
    truncated: bool = False


class SnapshotRecord(_Strict):
    """One ready snapshot of a run's sandbox (recovery "snapshot")."""

    snapshot_id: str
    mode: str
    taken_at: datetime
    size_bytes: int | None = None
    # How long the sandbox was held paused for it.
    pause_seconds: float = 0
    # The attempt and fresh-context start of the agent it holds (memory mode adopts it).
    attempt: int
    fresh_start: int = 0
    # The agent's request it answered (0: taken after a checkpoint change).
    request: int = 0


class CheckpointSummary(_Strict):
    next: str | None = None
    last_note: str | None = None


class DailyLimit(_Strict):
    """The provider key's daily spending limit as last read (Runtime's `GET /v1/limits`):
    the most it may commit in any 24 hours (None: no limit set), what it has used (charges
    settled plus money on hold) and what is left."""

    limit_usd: float | None = None
    used_usd: float = 0
    remaining_usd: float | None = None
    read_at: datetime


class RunStatus(_Strict):
    """What the `status` query answers."""

    run_id: str
    state: RunState
    attempt: int
    sandbox_id: str | None = None
    process_id: str | None = None
    restarts_used: int = 0
    fresh_starts_used: int = 0
    budget: Budget
    hours_used: float = 0
    # Time paused for the agent's questions and waits (`budget.max_wait_hours`; not run hours).
    wait_hours_used: float = 0
    # What the budget counts: the provider's charges where it has a figure (Runtime), the
    # estimate (sandbox lifetime x `rates`) elsewhere.
    spend_usd: float = 0
    # The provider's own figure for the sandboxes it has one for (None: none yet, or a
    # provider that keeps no account), and the estimate for every sandbox.
    spend_charged_usd: float | None = None
    spend_estimated_usd: float = 0
    # The provider key's daily spending limit as last read (None: not read, or none kept).
    daily_limit: DailyLimit | None = None
    # The run is held only by that daily limit: it goes on by itself when the window reopens.
    waiting_for_daily_window: bool = False
    started_at: datetime
    # The agent's last checkpoint write the run took (runs begun before the
    # `progress-is-checkpoints` marker: the stall clock's last start).
    last_progress_at: datetime | None = None
    # While an agent runs: when it is restarted as stalled unless it writes a checkpoint
    # first, and the spec's `stall_seconds` that took (the status says it from half on).
    stalls_at: datetime | None = None
    stall_seconds: float | None = None
    checkpoint_bytes: int = 0
    checkpoint_summary: CheckpointSummary | None = None
    checkpoint_rejected: str | None = None
    attention_reason: str | None = None
    restarts: list[RestartRecord] = Field(default_factory=list)
    # When the current sandbox's lease ends (extended while the agent progresses).
    lease_ends_at: datetime | None = None
    # Times a sandbox paused at its lease end was woken and carried on, with no restart.
    lease_resumes: int = 0
    # How the current sandbox is isolated, said plainly (local provider).
    isolation: str | None = None
    # The host the current sandbox lives on (its worker's `OVERNIGHT_HOST`; local sandboxes of
    # runs begun with host queues), and the hosts the run took as lost.
    host: str | None = None
    lost_hosts: list[str] = Field(default_factory=list)
    # Every local sandbox of the run by id, and the host it lives on (`overnight logs` and
    # `inspect` read a sandbox on its own host, and say which host that is from elsewhere).
    sandbox_hosts: dict[str, str] = Field(default_factory=dict)
    # The last words of the agent that ended most recently (any reason).
    last_words: LastWords | None = None
    # Snapshot recovery: the latest ready snapshot, captures taken and failed, the sandbox's
    # total pause for them, the last failure, and the snapshot the current sandbox came from.
    latest_snapshot: SnapshotRecord | None = None
    # Every snapshot the run still keeps (id, size, pause time), oldest first.
    snapshots: list[SnapshotRecord] = Field(default_factory=list)
    snapshots_taken: int = 0
    snapshot_failures: int = 0
    snapshot_pause_seconds: float = 0
    snapshot_error: str | None = None
    restored_from: str | None = None
    # The model spend (part of `spend_usd`): the worker's gateway's figure when the run's calls
    # go through it (`spend_model_source` "gateway"), else what the agent reported ("agent");
    # the agent's own report beside the gateway's when the two differ by more than 5%; the
    # model API's trouble the gateway retried, lately; calls refused at the spend cap.
    spend_model_usd: float = 0
    spend_model_source: Literal["gateway", "agent"] = "agent"
    spend_model_reported_usd: float | None = None
    model_api: str | None = None
    model_calls_capped: int = 0
    talk: AgentTalk | None = None
    outputs: RunOutputs | None = None
    # Connections its sandboxes' network refused, per host asked for, most first.
    egress_refused: dict[str, int] = Field(default_factory=dict)
    safety_net: SafetyNet | None = None  # what the restarts cost (None: run begun before)
    # Why the run failed, in one line, when it failed at once on what no retry fixes.
    failure: str | None = None
    # Why it was cancelled, as the person who cancelled it said (None: not cancelled).
    cancel_reason: str | None = None
    # What a starting run waits on: its create's last failed try, and when the next is due.
    waiting_on: str | None = None
    # The done check (`done_when`): failed rounds so far (`budget.max_done_checks`), and the
    # checks of the latest round, in order (it stops at the first that fails).
    done_checks_used: int = 0
    done_checks: list[DoneCheck] = Field(default_factory=list)
    # The workspaces kept at its checkpoints (None: the run keeps none).
    workspace: WorkspaceView | None = None
    # The commit the run's branch on the origin holds, as the worker saw it there (None: not
    # pushed yet, or a run begun before its finish pushed), and its pull request's address.
    pushed_commit: str | None = None
    pull_request_url: str | None = None
    # CI rounds (`pull_request.until_checks_pass`): the commit watched, where its checks
    # stand, the rounds used and the check that failed last (None: the run watches no CI).
    ci: CiView | None = None
