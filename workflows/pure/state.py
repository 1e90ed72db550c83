"""Everything an `AgentRun` knows, in one model, so continue-as-new can carry it whole.

Pure data: no temporalio imports, no I/O. The workflow mutates it; `decide` reads it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from activities.models import GatewayBooks
from overnight.admission import AdmissionTerms
from overnight.agent_requests import (
    AgentRequests,
    AskRequest,
    ModelUsage,
    RunOutputs,
    WaitRequest,
)
from overnight.checkpoint_text import CheckpointFacts
from overnight.ci_rounds import CiView
from overnight.done_check import DoneCheck
from overnight.models import (
    Budget,
    DailyLimit,
    LastWords,
    RestartRecord,
    RunSpec,
    RunState,
    SnapshotRecord,
)
from overnight.retry_note import RetryNote
from overnight.run_costs import SafetyNet
from overnight.workspace_spec import KeptWorkspace


class ChargeFigure(BaseModel):
    """What the provider charged one sandbox (settled + held), as last read, beside the
    estimate of that sandbox's cost up to the same moment: the budget swaps one for the other
    and keeps estimating only the time since."""

    model_config = ConfigDict(extra="forbid")

    micros: int
    estimated_usd: float
    read_at: datetime


class SupervisorState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    spec: RunSpec
    state: RunState = "starting"
    budget: Budget
    started_at: datetime

    # The current sandbox and agent process (None between sandboxes).
    attempt: int = 0
    sandbox_id: str | None = None
    process_id: str | None = None
    sandbox_started_at: datetime | None = None
    # Sandboxes of this run that may still be paused (kept for a look), oldest first.
    paused_sandboxes: list[str] = Field(default_factory=list)
    # How the current sandbox is isolated, as its provider said (None: the provider's own).
    isolation: str | None = None

    # Leases (see workflows.pure.lease). False for runs begun before leases were kept, so their
    # recorded histories replay unchanged.
    lease_keeping: bool = False
    # A paused sandbox's lease has ended when either its provider's end or `lease_ends_at` has
    # come (workflows.pure.lease.lease_ended); before, the provider's end alone. Runs begun with
    # LEASE_END_EITHER_PATCH.
    lease_end_either: bool = False
    # A local sandbox paused below its host's floor of free space needs attention in place
    # (decide); runs begun with HOST_FLOOR_PATCH.
    host_floor_kept: bool = False
    lease_ends_at: datetime | None = None
    # When the current lease was last extended (or granted): progress after it earns the next.
    lease_extended_at: datetime | None = None
    # Times a sandbox paused at its lease end was woken to carry on (no restart).
    lease_resumes: int = 0
    # Times an agent its sandbox's pause ended (no cgroup to freeze) was started again in the
    # same sandbox after the wake (workflows.same_sandbox_steps; no restart).
    pause_resumes: int = 0
    # The current sandbox was last seen paused: salvaging its checkpoint must wake it.
    sandbox_paused: bool = False
    # Where the provider's watch of the current sandbox stands (opaque; None: start a new one).
    watch_token: str | None = None

    restarts_used: int = 0
    fresh_starts_used: int = 0
    restarts: list[RestartRecord] = Field(default_factory=list)

    # Time spent waiting for a person does not count against max_hours.
    attention_seconds: float = 0
    attention_since: datetime | None = None
    attention_reason: str | None = None
    # A restart that was due when the budget ran out; done once the budget is extended.
    pending_restart: str | None = None
    # That restart was counted when it was decided (its new sandbox's create then failed), so
    # the extension does it without counting it again (runs begun with `fail_fast`).
    pending_counted: bool = False

    # Sandboxes that have ended contribute their whole lifetime here.
    closed_spend_usd: float = 0
    # The part of that which is the current sandbox's (its leases before a wake), so its
    # provider's figure can replace its whole estimate.
    sandbox_spent_before_usd: float = 0
    # The provider's figures by sandbox id (Runtime; none on the local provider), when they
    # were last read, and the key's daily spending limit as last read.
    charges: dict[str, ChargeFigure] = Field(default_factory=dict)
    money_read_at: datetime | None = None
    daily_limit: DailyLimit | None = None
    # The current wait for a person is for the key's daily spending window to reopen: the
    # run looks again now and then and goes on by itself (a person may still extend or cancel).
    daily_window_wait: bool = False

    # When the stall clock last started: a checkpoint taken, and also a new sandbox, a fresh
    # start, a wake (the stall restart comes `spec.stall_seconds` after it).
    last_progress_at: datetime | None = None
    # When the agent last wrote a checkpoint the run took: its progress, as a person is told
    # it (runs begun with `progress_is_checkpoints`; before, the stall clock's start was).
    last_checkpoint_at: datetime | None = None
    progress_is_checkpoints: bool = False

    # The last good checkpoint: workflow history is its off-machine copy.
    checkpoint: str | None = None
    checkpoint_digest: str | None = None
    checkpoint_is_json: bool = False
    # What the kept checkpoint says (its summary, a snapshot request), as read with it. None
    # for runs from before it was kept: the text is then read (never raising) when needed.
    checkpoint_facts: CheckpointFacts | None = None
    # Digest of the last version seen, good or not, so a rejected file is not re-sent.
    seen_digest: str | None = None
    checkpoint_rejected: str | None = None

    cancel_requested: bool = False
    cancel_reason: str | None = None

    # The current agent process's fresh-context start (0: the attempt's first agent).
    process_fresh_start: int = 0
    # The last words of the agent that ended most recently (redacted in the worker).
    last_words: LastWords | None = None
    # Notifications (see workflows.notify_steps). False for runs begun before them, so their
    # recorded histories replay unchanged; the count numbers each state change told of.
    notifying: bool = False
    notifications_sent: int = 0

    # Snapshot recovery (see workflows.pure.snapshot): ready snapshots kept (oldest first), captures
    # tried (each names one), the agent's last request answered, and for the status and spend.
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

    # Admission (workflows/admission_steps.py): what the run asked its pool for (None: nothing,
    # or given back), and whether the pool has let it in.
    admission: AdmissionTerms | None = None
    admitted: bool = False
    # The run gave its place back for a long wait (`admission_steps.step_out`) and asks again
    # before its sandbox wakes; meanwhile it is in no pool (the admission workflow asks).
    stepped_out: bool = False

    # Which search attributes the namespace has (None until checked).
    search_attributes: list[str] | None = None

    # What the agent asks of its supervisor through the kit (workflows.pure.kit_requests). False for
    # runs begun before it, so their recorded histories replay unchanged.
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
    # The sandbox was paused where it stands (the spend budget ran out): the same agent is
    # woken on extension, with nothing redone.
    paused_in_place: bool = False
    # Model spend the agent reported, by stream (cumulative within each), and what no longer
    # fits in that map.
    model_usage: dict[str, ModelUsage] = Field(default_factory=dict)
    # Connections its sandboxes' network refused, per sandbox, per host asked for
    # (workflows/pure/egress.py).
    egress_refused: dict[str, dict[str, int]] = Field(default_factory=dict)
    model_usd_folded: float = 0
    # Model calls through the worker's gateway (workflows/pure/model_books.py): whether the
    # run's are (False for runs begun before, so their histories replay unchanged), what each
    # host's gateway booked (by host queue, "" for a run's one worker), and the spend budget
    # the gateway's cap was last set from.
    gateway_metered: bool = False
    gateway_books: dict[str, GatewayBooks] = Field(default_factory=dict)
    model_cap_budget: float | None = None
    # The request body (its hash) whose repeats the run last restarted its agent for.
    gateway_loop_acted: str | None = None
    outputs: RunOutputs | None = None
    request_refused: str | None = None
    # The kit's requests file (workflows.pure.kit_requests): whether the run reads it (False for
    # runs begun before, so their histories replay unchanged), what the current sandbox's says as
    # last taken, and the digest of its version last seen.
    requests_file: bool = False
    file_requests: AgentRequests | None = None
    requests_digest: str | None = None
    # A coding agent's run takes the adapter's exit code 76 as a loop (workflows.pure.decide).
    loop_exit: bool = False
    # What the safety net cost (workflows.pure.safety_net). False for runs begun before it was
    # kept, so their figure is unknown rather than partial; a restart noticed and not yet done
    # (its lost work, and the person's wait before it so far); the sums so far.
    safety_net_kept: bool = False
    net_noticed_at: datetime | None = None
    net_lost_seconds: float = 0
    net_attention_seconds_at_notice: float = 0
    net_totals: SafetyNet = Field(default_factory=SafetyNet)
    # Many hosts (workflows.pure.hosts): a local sandbox's steps go to its host's own queue. False
    # for runs begun before, so their histories replay on the shared queue. By sandbox id, the
    # queue of the host that made it; that host's lost threshold as its create said; the hosts
    # this run took as lost (never sent anything again); and, by host queue, since when a step
    # there has waited unstarted (none: its steps are taken).
    host_routing: bool = False
    sandbox_hosts: dict[str, str] = Field(default_factory=dict)
    host_lost_seconds: float | None = None
    lost_hosts: list[str] = Field(default_factory=list)
    host_unseen_since: dict[str, datetime] = Field(default_factory=dict)
    # What no retry fixes fails the run at once (workflows.pure.hopeless). False for runs begun
    # before, so their histories replay unchanged; `failure`: the one line it failed with.
    fail_fast: bool = False
    failure: str | None = None
    # The create's last failed try, as its activity told (overnight/retry_note.py), while it
    # waits for the next; runs begun with `fail_fast` only. None once the create ends.
    waiting_on: RetryNote | None = None
    # The done check (workflows.pure.done; runs with `done_when`): failed rounds counted against
    # `budget.max_done_checks`, agents started again for one (their start keys), the latest
    # round's checks in order, and the failure the agent is to be started again with (kept
    # while a person decides).
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
    # The workspace kept at each checkpoint (workflows.pure.workspace): whether the run keeps it
    # (None: not asked yet; asked behind a patch marker at its first checkpoint), how many
    # checkpoints it has numbered, the last ones kept (bounded), the commit it started from,
    # the digest of the checkpoint last kept (one keep per change), the last keep's problem,
    # whether the memo `reap` reads is set; a rewind asked, its target while its sandbox is
    # made, and the rewinds done.
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
    # A finished run's delivery (workflows/delivery_steps.py, workflows/pure/delivery.py):
    # whether its finish waits for its branch on the origin (False for runs begun before, so
    # their histories replay unchanged); the date of the commit its push makes (fixed at the
    # first try, so every try makes the same commit); the commit the worker saw the branch
    # hold; its pull request; and which of the two waits for a person, its sandbox paused with
    # the work ("push", "pull_request"; None: neither).
    finish_pushes: bool = False
    push_at: datetime | None = None
    pushed_commit: str | None = None
    pull_request_url: str | None = None
    delivery_waits: Literal["push", "pull_request", "checks"] | None = None
    # The commit the pull request was last opened or brought up to date for.
    pull_request_commit: str | None = None
    # CI rounds (workflows/pure/ci.py; runs whose pull request asks `until_checks_pass`):
    # whether the run watches its CI (None: not asked yet; asked behind a marker at its first
    # watch), what the status shows of it, the agents started again for a failing check, the
    # failure the next is to be told (kept while a person decides), each round's failing
    # check, and the time spent waiting on CI (neither run time nor a wait of the agent's).
    ci_watching: bool | None = None
    ci_view: CiView | None = None
    ci_rounds_used: int = 0
    ci_told: str | None = None
    ci_failed: list[str] = Field(default_factory=list)
    ci_waiting_since: datetime | None = None
    ci_waited_seconds: float = 0
    # A keep that could not be pushed holds the run for a person (runs begun with
    # `KEEP_HELD_PATCH` and `keep_workspace`): the number of the checkpoint whose keep failed.
    keep_waits: int | None = None
