"""One input model and one result model per sandbox activity.

The workflow imports only this module (never a provider), and refers to activities by the
names in `ActivityName`, so workflow code stays free of I/O imports. The models of a few
concerns live in modules of their own so that this one stays small (money, the checkpoint
read, the create and start, the observation); they are re-exported here, where the
workflows, the activities and the tests import them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from activities.models.checkpoint import CheckpointRead as CheckpointRead
from activities.models.checkpoint import CheckpointSalvage as CheckpointSalvage
from activities.models.checkpoint import CheckpointStatus as CheckpointStatus
from activities.models.checkpoint import OutputTail as OutputTail
from activities.models.checkpoint import ReadCheckpointInput as ReadCheckpointInput
from activities.models.checkpoint import RequestsRead as RequestsRead
from activities.models.money import DailyLimitRead as DailyLimitRead
from activities.models.money import GatewayBooks as GatewayBooks
from activities.models.money import MoneyRead as MoneyRead
from activities.models.money import ReadDailyLimitInput as ReadDailyLimitInput
from activities.models.money import SandboxCharge as SandboxCharge
from activities.models.observe import Observation as Observation
from activities.models.observe import ObserveInput as ObserveInput
from activities.models.observe import ProcessState as ProcessState
from activities.models.observe import SandboxState as SandboxState
from activities.models.start import AgentStarted as AgentStarted
from activities.models.start import CreateSandboxInput as CreateSandboxInput
from activities.models.start import SnapshotRestore as SnapshotRestore
from activities.models.start import StartAgentInput as StartAgentInput
from overnight.core.admission import AdmissionTerms
from overnight.core.models import Provider, RunSpec


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
    # (activities.sandbox.lifecycle, activities/providers/local/run_store.py).
    FREE_RUN_STORE = "free_run_store"
    CHECK_SEARCH_ATTRIBUTES = "check_search_attributes"
    # Notifications (activities.notify.activities): a first try to every target of a state
    # change, and one more try for one target (from the `OvernightNotify` workflow).
    SEND_NOTIFICATION = "send_notification"
    DELIVER_NOTIFICATION = "deliver_notification"
    # Snapshot recovery (activities.sandbox.snapshots).
    TAKE_SNAPSHOT = "take_snapshot"
    DELETE_SNAPSHOTS = "delete_snapshots"
    LIST_SNAPSHOTS = "list_snapshots"
    # Money (activities.sandbox.daily_limit): the key's daily spending limit, read on its own
    # while a run waits for the daily window to reopen.
    READ_DAILY_LIMIT = "read_daily_limit"
    # The worker's grants (activities.admission.grants): what of a spec this worker allows, asked at
    # a run's start before anything is made.
    CHECK_SPEC = "check_spec"
    # The agent kit's requests (activities.sandbox.kit_requests): an answer written for the agent.
    ANSWER_AGENT = "answer_agent"
    # `overnight reap` as an activity (overnight.worker.reap_schedule), for the schedule the
    # worker sets up (`OvernightReap`, workflows.reap_run).
    REAP_SANDBOXES = "reap_sandboxes"
    # Admission (activities.admission.activities): a run asks its pool for a place
    # (signal-with-start of the pool's admission workflow); the admission workflow asks which
    # holders have closed.
    REQUEST_ADMISSION = "request_admission"
    CLOSED_WORKFLOWS = "closed_workflows"
    # The admission workflow's limits and bounds, from the worker running it (a local
    # activity), and which holders gave their place back or closed (asked before freeing it).
    POOL_SETTINGS = "pool_settings"
    RELEASED_HOLDERS = "released_holders"
    # Many hosts (activities.admission.host_check): whether a host's queue still has a poller, asked
    # on the shared queue when an activity on that host's queue waited too long to start.
    CHECK_HOST = "check_host"
    # The done check (activities.delivery.done_checks): one command of `RunSpec.done_when`, run in
    # the sandbox after the agent exited 0.
    RUN_DONE_CHECK = "run_done_check"
    # The done check's own sandbox (activities.delivery.done_sandbox): the work pushed and confirmed
    # on the origin, and a fresh sandbox with a clean clone at that commit for `done_when`.
    PREPARE_DONE_CHECK = "prepare_done_check"
    # The workspace kept at each checkpoint (activities.workspace.activities).
    KEEP_WORKSPACE = "keep_workspace"
    # The gateway's cap on a sandbox's model calls, set again after `extend --spend`
    # (activities.coding_agent.model_calls).
    SET_MODEL_CAP = "set_model_cap"
    # A finished run's delivery (issue 50): its work pushed to its branch and seen there by
    # the worker (activities.delivery.branch_push), and its pull request opened or brought up to
    # date with the worker's GitHub token (activities.delivery.pull_request).
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
    # `overnight reap` deletes it after; overnight.core.retention).
    keep_until: datetime | None = None


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


class RunDoneCheckInput(_Model):
    """Run one command of the done check in the sandbox (in `cwd`, with the spec's `env`), its
    time limited, its output's tail brought back redacted; on failure the tail is written for
    the agent too (`overnight.core.done_check.DONE_CHECK_FILE`), on success that file removed."""

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
    # The Runtime egress secret holding the run's model key (overnight/core/runtime_model_key.py),
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
    """Ask the worker whether it allows `spec` (its grants: overnight/core/grants.py)."""

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
