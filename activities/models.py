"""One input model and one result model per sandbox activity.

The workflow imports only this module (never a provider), and refers to activities by the
names in `ActivityName`, so workflow code stays free of I/O imports.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from activities.workspace_models import WorkspaceRestore, WorkspaceRestored
from overnight.admission import AdmissionTerms
from overnight.agent_requests import AgentRequests
from overnight.checkpoint_text import CheckpointFacts
from overnight.models import Provider, RunSpec

SandboxState = Literal["starting", "running", "paused", "stopped", "missing"]
ProcessState = Literal["running", "exited", "killed", "missing"]
CheckpointStatus = Literal["ok", "unchanged", "missing", "too_large", "unreadable", "outside"]


class ActivityName:
    """Registered activity names: the workflow calls them, tests mock them by these names."""

    CREATE_SANDBOX = "create_sandbox"
    START_AGENT = "start_agent"
    OBSERVE_AGENT = "observe_agent"
    READ_CHECKPOINT = "read_checkpoint"
    PAUSE_SANDBOX = "pause_sandbox"
    STOP_SANDBOX = "stop_sandbox"
    WAKE_SANDBOX = "wake_sandbox"
    EXTEND_SANDBOX = "extend_sandbox"
    LIST_SANDBOXES = "list_sandboxes"
    # A run's store on a worker (a coding agent's session store), freed at the run's end
    # (activities.sandbox_lifecycle, activities/providers/local/run_store.py).
    FREE_RUN_STORE = "free_run_store"
    CHECK_SEARCH_ATTRIBUTES = "check_search_attributes"
    # Notifications (activities.notify.activities): a first try to every target of a state
    # change, and one more try for one target (from the `OvernightNotify` workflow).
    SEND_NOTIFICATION = "send_notification"
    DELIVER_NOTIFICATION = "deliver_notification"
    # Snapshot recovery (activities.snapshots).
    TAKE_SNAPSHOT = "take_snapshot"
    DELETE_SNAPSHOTS = "delete_snapshots"
    LIST_SNAPSHOTS = "list_snapshots"
    # Money (activities.daily_limit): the key's daily spending limit, read on its own
    # while a run waits for the daily window to reopen.
    READ_DAILY_LIMIT = "read_daily_limit"
    # The worker's grants (activities.grants): what of a spec this worker allows, asked at a
    # run's start before anything is made.
    CHECK_SPEC = "check_spec"
    # The agent kit's requests (activities.kit_requests): an answer written for the agent.
    ANSWER_AGENT = "answer_agent"
    # `overnight reap` as an activity (overnight.worker.reap_schedule), for the schedule the
    # worker sets up (`OvernightReap`, workflows.reap_run).
    REAP_SANDBOXES = "reap_sandboxes"
    # Admission (activities.admission): a run asks its pool for a place (signal-with-start of
    # the pool's admission workflow); the admission workflow asks which holders have closed.
    REQUEST_ADMISSION = "request_admission"
    CLOSED_WORKFLOWS = "closed_workflows"
    # The admission workflow's limits and bounds, from the worker running it (a local
    # activity), and which holders gave their place back or closed (asked before freeing it).
    POOL_SETTINGS = "pool_settings"
    RELEASED_HOLDERS = "released_holders"
    # Many hosts (activities.host_check): whether a host's queue still has a poller, asked on
    # the shared queue when an activity on that host's queue waited too long to start.
    CHECK_HOST = "check_host"
    # The done check (activities.done_checks): one command of `RunSpec.done_when`, run in the
    # sandbox after the agent exited 0.
    RUN_DONE_CHECK = "run_done_check"
    # The done check's own sandbox (activities.done_sandbox): the work pushed and confirmed on
    # the origin, and a fresh sandbox with a clean clone at that commit for `done_when`.
    PREPARE_DONE_CHECK = "prepare_done_check"
    # The workspace kept at each checkpoint (activities.workspace).
    KEEP_WORKSPACE = "keep_workspace"
    # The gateway's cap on a sandbox's model calls, set again after `extend --spend`
    # (activities.model_calls).
    SET_MODEL_CAP = "set_model_cap"
    # A finished run's delivery (issue 50): its work pushed to its branch and seen there by
    # the worker (activities.branch_push), and its pull request opened or brought up to date
    # with the worker's GitHub token (activities.pull_request).
    CONFIRM_PUSHED = "confirm_pushed"
    OPEN_PULL_REQUEST = "open_pull_request"
    WATCH_CHECKS = "watch_checks"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SandboxRef(_Model):
    provider: Provider
    sandbox_id: str
    # A wake: first check the key's daily spending limit still covers this much (the fresh
    # lease), and refuse with `DailySpendingLimit` if not. Ignored by pause and stop.
    daily_room_micros: int | None = Field(default=None, ge=0)
    # A pause or stop at a sandbox's end: read what it was charged afterwards.
    read_charge: bool = False
    # A pause at its run's end: the sandbox is kept for a look until then (labelled so that
    # `overnight reap` deletes it after; overnight.retention).
    keep_until: datetime | None = None


class SandboxCharge(_Model):
    """What the provider charged for one sandbox so far (Runtime's `GET /v1/usage`), money in
    integer microdollars: settled charges, and money held against its lease not yet settled."""

    sandbox_id: str
    charged_micros: int = 0
    held_micros: int = 0
    running_seconds: float = 0


class DailyLimitRead(_Model):
    """The key's daily spending limit (Runtime's `GET /v1/limits`), in microdollars over the
    last 24 hours; `limit_micros` None: no limit set."""

    limit_micros: int | None = None
    used_micros: int = 0
    remaining_micros: int | None = None


class MoneyRead(_Model):
    """A look at what a sandbox cost and what the key may still spend (best effort: either
    part is None when the provider cannot tell, or the read failed)."""

    charge: SandboxCharge | None = None
    daily: DailyLimitRead | None = None
    # The provider keeps no account (local sandboxes): spend stays an estimate.
    keeps_account: bool = True


class ReadDailyLimitInput(_Model):
    provider: Provider


class GatewayBooks(_Model):
    """What a host's gateway booked to a run's model calls (activities/gateway/model_ledger.py):
    its figure of the run's model spend, and what the status says of the model API."""

    usd: float = Field(default=0, ge=0)
    answers: int = Field(default=0, ge=0)
    # Upstream errors retried at the gateway, the last one and when (epoch seconds).
    retries: int = Field(default=0, ge=0)
    last_upstream_error: str = ""
    last_upstream_error_at: float | None = None
    # Requests refused at the cap, and how many in a row carried the same body (its SHA-256).
    cap_refusals: int = Field(default=0, ge=0)
    repeats: int = Field(default=0, ge=0)
    last_body: str = ""

    def news_beside(self, known: GatewayBooks | None) -> bool:
        """Whether these books are news to a run that knows `known`: a look comes back early
        for them (activities/observe.py), and the run looks again at once."""
        return known is None or (self.usd, self.cap_refusals) != (known.usd, known.cap_refusals)


class SandboxInfo(_Model):
    sandbox_id: str
    name: str = ""
    state: SandboxState
    stop_reason: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    created_at: datetime | None = None
    # When its lease ends (it pauses or stops then); None: no time limit, or not known.
    lease_ends_at: datetime | None = None
    # How it is isolated and limited, in a sentence (local sandboxes; None: not said).
    isolation: str | None = None
    # Its pause ends its agents, files kept (a local sandbox with no cgroup to freeze): after
    # a wake the run starts the agent again from its checkpoint, in the same sandbox.
    pause_ends_agents: bool = False
    # When a stopped sandbox's disk was deleted (local sandboxes; None: not deleted, or not
    # known: a stopped Runtime sandbox's disk is gone with its stop).
    deleted_at: datetime | None = None
    # Why a paused sandbox paused, where the provider says ("lease_expired", "requested", or
    # a local sandbox's "disk limit of N MiB reached (...)"); None: not said.
    pause_reason: str | None = None


class OutputTail(_Model):
    """The last lines of an agent's output (~40 lines / 4 KiB), secret values redacted."""

    text: str
    # Earlier output was left out.
    truncated: bool = False


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
    # (overnight.hosts). None: any worker reaches it (Runtime), or a worker from before.
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
    # A start after a failing CI check (overnight/ci_rounds.py): the round (0: none), in the
    # start key, and what the agent is told, written to `DONE_CHECK_FILE` before it starts.
    ci_round: int = Field(default=0, ge=0)
    told: str = ""


class RunDoneCheckInput(_Model):
    """Run one command of the done check in the sandbox (in `cwd`, with the spec's `env`), its
    time limited, its output's tail brought back redacted; on failure the tail is written for
    the agent too (`overnight.done_check.DONE_CHECK_FILE`), on success that file removed."""

    provider: Provider
    sandbox_id: str
    command: str
    index: int = Field(ge=0)
    round: int = Field(ge=1)
    cwd: str
    env: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: float = Field(gt=0)
    secret_env: list[str] = Field(default_factory=list)
    # A check in the run's check sandbox (`sandbox_id`): the agent's sandbox, where a failure
    # is written for it, and the commit checked. None: the check runs in the agent's sandbox.
    tell_sandbox_id: str | None = None
    commit: str | None = None
    # One of `done_when_in_place` (`index` is in that list).
    in_place: bool = False


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
    """The agent kit's requests file as found (activities.requests_file): what it asks, read
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
    # session file the checkpoint names (activities.coding_agent_sessions); None: none.
    session_store_of: str | None = None


class CheckpointSalvage(CheckpointRead):
    """What `read_checkpoint` salvages from a sandbox at an attempt's end: the checkpoint,
    and (when asked, best effort) the agent's last words and the kit's requests file."""

    output_tail: OutputTail | None = None
    requests: RequestsRead | None = None


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


class SandboxSettled(SandboxInfo):
    """A sandbox just paused or stopped, with what it was charged (when the provider keeps an
    account and could tell)."""

    charge: SandboxCharge | None = None


class ExtendSandboxInput(_Model):
    """Move the sandbox's lease end to `until` (Runtime: at most an hour ahead of now).

    An end, not an amount: the activity extends by what is missing from the lease as it is
    now, so a retried extension never adds twice."""

    provider: Provider
    sandbox_id: str
    until: datetime
    # What one second of lease costs: the key's daily spending limit must still cover the
    # seconds added, else the extension is refused (`DailySpendingLimit`). None: not checked.
    micros_per_second: float | None = Field(default=None, ge=0)


class SetModelCapInput(_Model):
    """Set the gateway's model spend cap for the sandbox's next calls, from the run's allowance
    as in CreateSandboxInput. A figure, not an amount added: a retried call never raises it
    twice."""

    provider: Provider
    sandbox_id: str
    model_allowance_usd: float | None = None
    model_booked_by_host: dict[str, float] = Field(default_factory=dict)


class ListSandboxesInput(_Model):
    provider: Provider
    run_id: str | None = None
    include_stopped: bool = False


class SandboxList(_Model):
    sandboxes: list[SandboxInfo] = Field(default_factory=list)


class RunStoreRef(_Model):
    """The run whose store on this worker is freed (its sandboxes already ended)."""

    provider: Provider
    run_id: str
    # The Runtime egress secret holding the run's model key (overnight/runtime_model_key.py),
    # erased too; "" for none.
    egress_secret: str = ""


class RunStoreFreed(_Model):
    # What the store held on this worker's disk (0: it had none here).
    freed_bytes: int = 0


class SearchAttributeCheck(_Model):
    """Which of overnight's search attributes the namespace has registered."""

    present: list[str] = Field(default_factory=list)


class SearchAttributeCheckInput(_Model):
    """No fields: the activity asks the worker's own namespace."""


class TakeSnapshotInput(_Model):
    """Pause the sandbox, capture it, wait for `ready` (or `failed`), wake it, answer the
    agent's request; then delete `delete_ids` if the capture is ready."""

    provider: Provider
    sandbox_id: str
    run_id: str
    # The run's n-th capture (its name `{run_id}-snap-{n}` makes a retry find it).
    number: int = Field(ge=1)
    mode: str = "disk"
    retention_days: int = Field(default=7, ge=1)
    # The agent's request number (0: an automatic capture after a checkpoint change).
    request: int = Field(default=0, ge=0)
    delete_ids: list[str] = Field(default_factory=list)


class SnapshotTaken(_Model):
    state: Literal["ready", "failed"]
    snapshot_id: str | None = None
    size_bytes: int | None = None
    # How long the sandbox was held paused for it.
    pause_seconds: float = 0
    error: str | None = None
    deleted: list[str] = Field(default_factory=list)


class DeleteSnapshotsInput(_Model):
    provider: Provider
    snapshot_ids: list[str] = Field(default_factory=list)


class ListSnapshotsInput(_Model):
    provider: Provider
    run_id: str | None = None


class SnapshotSummary(_Model):
    snapshot_id: str
    state: str
    run_id: str | None = None
    size_bytes: int | None = None
    created_at: datetime | None = None


class SnapshotList(_Model):
    snapshots: list[SnapshotSummary] = Field(default_factory=list)


class SpecCheckInput(_Model):
    """Ask the worker whether it allows `spec` (its grants: overnight/grants.py)."""

    spec: RunSpec


class SpecCheck(_Model):
    """What in the spec the worker does not allow, one line each naming the field and the
    setting that would allow it; empty: the spec may run."""

    refusals: list[str] = Field(default_factory=list)
    # What the run must ask its pool for before it makes anything (None: nothing; runs
    # recorded before admission have none).
    admission: AdmissionTerms | None = None
    # A run pinned to hosts (`RunSpec.hosts`): this worker's `OVERNIGHT_HOST_LOST_SECONDS`, so
    # its first create waits for its host no longer than its later steps will.
    host_lost_seconds: float | None = None
    # Whether the spec's provider's sandboxes hold the run's work in a git clone, to be pushed
    # at its finish; False only for a provider whose agents are virtual (fakes/provider.py's,
    # for the scale bench and admission tests: `holds_no_work`).
    holds_work: bool = True


class AnswerAgentInput(_Model):
    """Write the answer to the agent's request `request_id` where the kit looks for it."""

    provider: Provider
    sandbox_id: str
    request_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    answer: str = Field(max_length=4000)


class ReapSummary(_Model):
    """What a scheduled reap took: counts, the disk it freed here, a line for each (at most
    `lines` of them) and the ones it could not delete."""

    deleted: int = 0
    failed: int = 0
    freed_bytes: int = 0
    lines: list[str] = Field(default_factory=list)
