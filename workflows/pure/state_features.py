"""The parts of `SupervisorState` that hold what the features a run may use keep: the agent
kit's requests, snapshots, the safety net's cost, many hosts, the done check, the kept
workspace, delivery and CI rounds, one model each.

Pure data: no temporalio imports, no I/O. Field names are those of the flat state carried
before the grouping (workflows/pure/state_shape.py reads and writes that shape).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from overnight.core.agent_requests import AgentRequests, AskRequest, RunOutputs, WaitRequest
from overnight.core.ci_rounds import CiView
from overnight.core.done_check import DoneCheck
from overnight.core.models import SnapshotRecord
from overnight.core.run_costs import SafetyNet
from overnight.core.workspace_spec import KeptWorkspace


class KitState(BaseModel):
    """What the agent asks of its supervisor through the kit (workflows.pure.kit_requests)."""

    model_config = ConfigDict(extra="forbid")

    # False for runs begun before it, so their recorded histories replay unchanged.
    agent_requests: bool = False
    # The question waiting for a person, its answer once given, and every answer by id.
    question: AskRequest | None = None
    answer_given: str | None = None
    answers: dict[str, str] = Field(default_factory=dict)
    # The agent's `wait_until` under way (its sandbox paused until `waiting_until`).
    wait: WaitRequest | None = None
    waiting_until: datetime | None = None
    # `{sandbox}:{request id}` of the last request acted on, so a look acts on it once; with
    # `talk_marks_apart` (runs begun since), of the last question, and `wait_handled` of the
    # last wait.
    request_handled: str | None = None
    wait_handled: str | None = None
    talk_marks_apart: bool = False
    # Time paused for a question or a wait: neither run time nor a stall.
    waiting_since: datetime | None = None
    waited_seconds: float = 0
    # That time has its own budget (`Budget.max_wait_hours`), a wait is clipped to it rather
    # than to the run hours left, and a long wait gives the run's admission place back. False
    # for runs begun before, so their recorded histories replay unchanged.
    wait_budget_kept: bool = False
    outputs: RunOutputs | None = None
    request_refused: str | None = None
    # The kit's requests file: whether the run reads it (False for runs begun before, so their
    # histories replay unchanged), what the current sandbox's says as last taken, and the
    # digest of its version last seen.
    requests_file: bool = False
    file_requests: AgentRequests | None = None
    requests_digest: str | None = None


class SnapshotState(BaseModel):
    """Snapshot recovery (see workflows.pure.snapshot): ready snapshots kept (oldest first),
    captures tried (each names one), the agent's last request answered, and for the status
    and spend."""

    model_config = ConfigDict(extra="forbid")

    snapshots: list[SnapshotRecord] = Field(default_factory=list)
    snapshot_tries: int = 0
    snapshot_last_try_at: datetime | None = None
    snapshot_request_done: int = 0
    # The checkpoint the latest snapshot holds (a capture after a change needs a newer one).
    snapshot_checkpoint_digest: str | None = None
    snapshots_taken: int = 0
    snapshot_failures: int = 0
    snapshot_error: str | None = None
    snapshot_pause_seconds: float = 0
    # Storage of snapshots already deleted.
    closed_snapshot_spend_usd: float = 0
    restored_from: str | None = None


class NetState(BaseModel):
    """What the safety net cost (workflows.pure.safety_net). `safety_net_kept` is False for
    runs begun before it was kept, so their figure is unknown rather than partial; a restart
    noticed and not yet done (its lost work, and the person's wait before it so far); the
    sums so far."""

    model_config = ConfigDict(extra="forbid")

    safety_net_kept: bool = False
    net_noticed_at: datetime | None = None
    net_lost_seconds: float = 0
    net_attention_seconds_at_notice: float = 0
    net_totals: SafetyNet = Field(default_factory=SafetyNet)


class HostsState(BaseModel):
    """Many hosts (workflows.pure.hosts): a local sandbox's steps go to its host's own queue.
    `host_routing` is False for runs begun before, so their histories replay on the shared
    queue. By sandbox id, the queue of the host that made it; that host's lost threshold as
    its create said; the hosts this run took as lost (never sent anything again); and, by host
    queue, since when a step there has waited unstarted (none: its steps are taken)."""

    model_config = ConfigDict(extra="forbid")

    host_routing: bool = False
    sandbox_hosts: dict[str, str] = Field(default_factory=dict)
    host_lost_seconds: float | None = None
    lost_hosts: list[str] = Field(default_factory=list)
    host_unseen_since: dict[str, datetime] = Field(default_factory=dict)


class DoneState(BaseModel):
    """The done check (workflows.pure.done; runs with `done_when`)."""

    model_config = ConfigDict(extra="forbid")

    # Failed rounds counted against `budget.max_done_checks`, agents started again for one
    # (their start keys), the latest round's checks in order, and the failure the agent is to
    # be started again with (kept while a person decides).
    done_checks_used: int = 0
    done_rounds: int = 0
    done_results: list[DoneCheck] = Field(default_factory=list)
    done_pending: str | None = None
    # `done_when` in a sandbox of its own (workflows/done_sandbox_steps.py): how many the run
    # has made (the next is `{run_id}-check-<n+1>`, its ref `check-<n+1>`: never a name twice),
    # and the one of the round under way (stopped at the round's end, whichever way it ends).
    check_sandboxes_made: int = 0
    check_sandbox_id: str | None = None
    # The last commit of the agent's work pushed and confirmed for a check.
    done_commit: str | None = None


class WorkspaceState(BaseModel):
    """The workspace kept at each checkpoint (workflows.pure.workspace): whether the run keeps
    it (None: not asked yet; asked behind a patch marker at its first checkpoint), how many
    checkpoints it has numbered, the last ones kept (bounded), the commit it started from,
    the digest of the checkpoint last kept (one keep per change), the last keep's problem,
    whether the memo `reap` reads is set; a rewind asked, its target while its sandbox is
    made, and the rewinds done."""

    model_config = ConfigDict(extra="forbid")

    workspace_keeping: bool | None = None
    workspace_count: int = 0
    workspace_kept: list[KeptWorkspace] = Field(default_factory=list)
    workspace_base: str | None = None
    workspace_digest: str | None = None
    workspace_problem: str | None = None
    workspace_memo: bool = False
    rewind_to: int | None = None
    rewinding: KeptWorkspace | None = None
    rewinds: int = 0
    # A keep that could not be pushed holds the run for a person (runs begun with
    # `KEEP_HELD_PATCH` and `keep_workspace`): the number of the checkpoint whose keep failed.
    keep_waits: int | None = None


class DeliveryState(BaseModel):
    """A finished run's delivery (workflows/delivery_steps.py, workflows/pure/delivery.py):
    whether its finish waits for its branch on the origin (False for runs begun before, so
    their histories replay unchanged); the date of the commit its push makes (fixed at the
    first try, so every try makes the same commit); the commit the worker saw the branch
    hold; its pull request; and which of the two waits for a person, its sandbox paused with
    the work ("push", "pull_request"; None: neither)."""

    model_config = ConfigDict(extra="forbid")

    finish_pushes: bool = False
    push_at: datetime | None = None
    pushed_commit: str | None = None
    pull_request_url: str | None = None
    delivery_waits: Literal["push", "pull_request", "checks"] | None = None
    # The commit the pull request was last opened or brought up to date for.
    pull_request_commit: str | None = None


class CiState(BaseModel):
    """CI rounds (workflows/pure/ci.py; runs whose pull request asks `until_checks_pass`):
    whether the run watches its CI (None: not asked yet; asked behind a marker at its first
    watch), what the status shows of it, the agents started again for a failing check, the
    failure the next is to be told (kept while a person decides), each round's failing
    check, and the time spent waiting on CI (neither run time nor a wait of the agent's)."""

    model_config = ConfigDict(extra="forbid")

    ci_watching: bool | None = None
    ci_view: CiView | None = None
    ci_rounds_used: int = 0
    ci_told: str | None = None
    ci_failed: list[str] = Field(default_factory=list)
    ci_waiting_since: datetime | None = None
    ci_waited_seconds: float = 0
