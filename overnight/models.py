"""The public contracts of an overnight run: what goes in, what a person sees, what comes out.

These models cross the wire through `pydantic_data_converter`, so they are plain data:
no methods that do I/O, and nothing that may not be serialised into workflow history.
"""

from __future__ import annotations

import posixpath
import re
from datetime import datetime
from typing import Literal

from pydantic import Field, JsonValue, ValidationInfo, field_validator, model_validator

from overnight.agent_requests import AgentTalk, RunOutputs
from overnight.agent_spec import CodingAgent, check_agent_way, check_http_base_url
from overnight.ci_rounds import CiView
from overnight.done_check import (
    DEFAULT_DONE_CHECK_SECONDS,
    MAX_DONE_CHECK_ROUNDS,
    MAX_DONE_CHECK_SECONDS,
    MAX_DONE_CHECKS,
    DoneCheck,
    check_done_when,
)
from overnight.egress import MAX_EGRESS, Network, check_egress
from overnight.hosts import MAX_SPEC_HOSTS, check_spec_hosts
from overnight.isolation import (
    MAX_BINDS,
    MAX_HOST_PORTS,
    HostBind,
    Isolation,
    check_binds,
    check_host_ports,
)
from overnight.model_base import (  # re-exported: the contracts' names stay here
    ENV_NAME_PATTERN as ENV_NAME_PATTERN,
)
from overnight.model_base import (
    MAX_ATTENTION_HOURS as MAX_ATTENTION_HOURS,
)
from overnight.model_base import MAX_CHECKPOINT_BYTES as MAX_CHECKPOINT_BYTES
from overnight.model_base import MAX_DISK_MIB as MAX_DISK_MIB
from overnight.model_base import MAX_FRESH_STARTS as MAX_FRESH_STARTS
from overnight.model_base import MAX_HOURS as MAX_HOURS
from overnight.model_base import MAX_MEMORY_MIB as MAX_MEMORY_MIB
from overnight.model_base import MAX_POLL_SECONDS as MAX_POLL_SECONDS
from overnight.model_base import MAX_RESTARTS as MAX_RESTARTS
from overnight.model_base import (
    MAX_RUN_LABELS,
    KeepDays,
    Label,
    Owner,
    Priority,
    _Strict,
    _StrictInput,
)
from overnight.model_base import (
    MAX_SECONDS as MAX_SECONDS,
)
from overnight.model_base import (
    MAX_SPEND_EXTENSION_USD as MAX_SPEND_EXTENSION_USD,
)
from overnight.model_base import (
    MAX_STALL_SECONDS as MAX_STALL_SECONDS,
)
from overnight.model_base import MIN_DISK_MIB as MIN_DISK_MIB
from overnight.model_base import (
    RESERVED_ENV as RESERVED_ENV,
)
from overnight.model_base import (
    RUN_ID_PATTERN as RUN_ID_PATTERN,
)
from overnight.model_base import (
    RUN_ID_PATTERN_OR_EMPTY as RUN_ID_PATTERN_OR_EMPTY,
)
from overnight.model_base import (
    Budget as Budget,
)
from overnight.model_base import (
    BudgetExtension as BudgetExtension,
)
from overnight.model_base import (
    PositiveHours as PositiveHours,
)
from overnight.model_base import (
    PositiveSeconds as PositiveSeconds,
)
from overnight.model_base import (
    Provider as Provider,
)
from overnight.model_base import (
    Rates as Rates,
)
from overnight.model_base import (
    RunState as RunState,
)
from overnight.notify_spec import MAX_WEBHOOKS, Webhook, webhooks_from_input
from overnight.provider_traits import traits
from overnight.pull_request_spec import PullRequestSpec, check_origin_for_pull_request
from overnight.run_costs import SafetyNet
from overnight.snapshot_spec import Recovery, SnapshotMode, check_snapshot_mode
from overnight.spec_paths import check_host_path
from overnight.workspace_spec import DEFAULT_WORKSPACE_MIB, MAX_WORKSPACE_MIB, WorkspaceView


def _workspace_path(value: str, field: str) -> str:
    """A path inside the sandbox: absolute, normalised, under /workspace."""
    if not value.startswith("/"):
        raise ValueError(f"{field} must be an absolute path under /workspace")
    normal = posixpath.normpath(value)
    if normal != "/workspace" and not normal.startswith("/workspace/"):
        raise ValueError(f"{field} must stay under /workspace (got {value!r})")
    return normal


class RunSpec(_StrictInput):
    """Everything needed to start one supervised agent run. Unknown fields are refused."""

    # Left out (""): taken from the workflow id by the workflow (schedules, plain clients).
    run_id: str = Field(default="", pattern=RUN_ID_PATTERN_OR_EMPTY)
    repo: str = Field(min_length=1)
    branch: str = ""
    # The agent: a coding agent overnight runs itself (`agent`: Claude Code or Codex, see
    # overnight/agent_spec.py), or one of your own (`agent_dir` uploaded, `command` run):
    # exactly one of the two ways.
    agent: CodingAgent | None = None
    agent_dir: str = ""
    command: str = ""
    cwd: str = "/workspace/app"
    env: dict[str, str] = Field(default_factory=dict)
    secret_env: list[str] = Field(default_factory=list)
    # The worker's variable holding the credential of an http(s) `repo` (a token): added by
    # the worker's gateway to the sandbox's git requests, never given to the sandbox
    # (granted as secret_env names are; docs/security.md#git-through-the-gateway).
    repo_credential: str = ""
    # The worker's variable holding the model API key, kept at the worker's gateway, which
    # sends the sandbox's model calls on with it (docs/gateway.md): the sandbox gets a token of
    # its own instead (OVERNIGHT_MODEL_URL / OVERNIGHT_MODEL_TOKEN). Granted as secret_env
    # names are. A coding agent's default: its vendor's variable when `secret_env` names it.
    model_credential: str = ""
    # Where the gateway sends those calls (a company gateway; empty: the vendor's own). A
    # coding agent's is its `agent.base_url`.
    model_base_url: str = Field(default="", max_length=2048)
    # Runtime only: copy the model key into the sandbox's environment, knowingly, where the
    # model API is one Runtime's egress secrets cannot reach (plain HTTP, or an address its
    # proxy does not carry). Without it such a spec is refused (docs/gateway.md).
    model_key_in_sandbox: bool = False
    checkpoint_path: str = "/workspace/checkpoint.json"
    max_checkpoint_bytes: int = Field(default=262144, gt=0, le=MAX_CHECKPOINT_BYTES)
    provider: Provider = "local"
    vcpu: int = Field(default=2, gt=0, le=64)
    memory_mib: int = Field(default=4096, gt=0, le=MAX_MEMORY_MIB)
    # The most its sandbox's files may hold (workspace, home, /tmp), MiB. Left out: the
    # worker's default (local: OVERNIGHT_SANDBOX_DISK_MIB; runtime: Runtime's own).
    disk_mib: int | None = Field(default=None, ge=MIN_DISK_MIB, le=MAX_DISK_MIB)
    sandbox_timeout_seconds: PositiveSeconds = 3600
    poll_seconds: float = Field(default=60, gt=0, le=MAX_POLL_SECONDS)
    stall_seconds: float = Field(default=900, gt=0, le=MAX_STALL_SECONDS)
    fresh_context_exit_code: int = Field(default=75, ge=1, le=255)
    max_fresh_starts: int = Field(default=50, ge=0, le=MAX_FRESH_STARTS)
    budget: Budget = Field(default_factory=Budget)
    rates: Rates = Field(default_factory=Rates)
    attention_hours: float = Field(default=24, gt=0, le=MAX_ATTENTION_HOURS)
    keep_sandboxes: bool = False
    # Days the paused sandboxes of failed attempts are kept after the run ends (0: none).
    keep_failed_days: KeepDays = 3
    # Local provider: how each sandbox is isolated ("none" only on purpose, granted by the
    # worker: docs/local-sandboxes.md) and which host paths it sees at the same path
    # (read-only unless `writable`).
    isolation: Isolation = "bubblewrap"
    binds: list[HostBind] = Field(default_factory=list, max_length=MAX_BINDS)
    # Local provider: TCP ports on the worker's loopback an isolated sandbox may reach (it has
    # a network of its own, which reaches out but not the host's loopback otherwise).
    host_ports: list[int] = Field(default_factory=list, max_length=MAX_HOST_PORTS)
    # Local provider: the hosts (their workers' `OVERNIGHT_HOST`) its sandboxes may be made
    # on, first choice first; none: any (docs/many-hosts.md#pinning-a-run-to-hosts).
    hosts: list[str] = Field(default_factory=list, max_length=MAX_SPEC_HOSTS)
    # What its sandboxes' network reaches (docs/security.md#the-network): "proxied", the
    # host names in `egress` (`github.com`, `*.pypi.org`) with its repository's host and its
    # coding agent's model API, all through the worker's gateway and only at public
    # addresses; or "open", every public name (granted by the worker). Held to the worker's
    # grants (`OVERNIGHT_EGRESS_ALLOW`, by default the package registries); no `egress`: the
    # worker's default list, those grants.
    network: Network = "proxied"
    egress: list[str] = Field(default_factory=list, max_length=MAX_EGRESS)
    # Webhooks told when the run needs a person, fails, finishes or is cancelled (and, if they
    # ask, of every restart); a worker-wide default comes from its environment
    # (docs/notifications.md).
    notify: list[Webhook] = Field(default_factory=list, max_length=MAX_WEBHOOKS)
    # How a restart recovers (see overnight/snapshot_spec.py and docs/snapshots.md): "checkpoint"
    # (clone, upload, checkpoint) or "snapshot" (the latest ready snapshot of the sandbox).
    recovery: Recovery = "checkpoint"
    # Left out: the provider's first ("memory" on runtime, "disk" on local).
    snapshot_mode: SnapshotMode | None = None
    # The least time between two captures (a request inside it waits for its end).
    snapshot_every_seconds: PositiveSeconds = 600
    snapshot_retention_days: int = Field(default=7, ge=1, le=365)
    # The agent declares a capture right after each checkpoint change safe (no request needed).
    snapshot_on_checkpoint: bool = False
    priority: Priority = 3  # admission: queued runs go in by priority, fairly across owners
    owner: Owner = ""
    # Words to find the run by (the console's filter, the `OvernightLabels` search
    # attribute): each letters, digits and `._:/-`, at most 40 characters; at most 10.
    labels: list[Label] = Field(default_factory=list, max_length=MAX_RUN_LABELS)
    # The done check (overnight/done_check.py): commands that must all pass after the agent
    # exits 0 for `finished`, else the agent is started again with the failure
    # (`budget.max_done_checks` failed rounds). Each has its own time limit. `done_when` runs
    # against the run's work pushed to `repo`, in a fresh sandbox of its own (a clean clone at
    # that commit, in `cwd`, with `env`: nothing else of the agent's); `done_when_in_place`
    # runs in the agent's own sandbox, first, for checks that need its running services.
    done_when: list[str] = Field(default_factory=list, max_length=MAX_DONE_CHECKS)
    done_when_in_place: list[str] = Field(default_factory=list, max_length=MAX_DONE_CHECKS)
    done_check_timeout_seconds: float = Field(
        default=DEFAULT_DONE_CHECK_SECONDS, gt=0, le=MAX_DONE_CHECK_SECONDS
    )
    # The workspace as the agent left it, committed at each checkpoint change to a private ref
    # (`refs/overnight/<run_id>/<n>`) and pushed to `repo`; a fresh sandbox starts from the
    # latest (overnight/workspace_spec.py). A keep that would push more than
    # `max_workspace_mib` is not pushed (the status says so) and the run goes on.
    keep_workspace: bool = False
    max_workspace_mib: int = Field(default=DEFAULT_WORKSPACE_MIB, ge=1, le=MAX_WORKSPACE_MIB)
    # The pull request the run opens once its work is on the origin (None: none;
    # overnight/pull_request_spec.py, docs/pull-requests.md).
    pull_request: PullRequestSpec | None = None

    @field_validator("notify", mode="before")
    @classmethod
    def _notify_shorthand(cls, value: object) -> object:
        return webhooks_from_input(value)

    @field_validator("labels")
    @classmethod
    def _labels_once_each(cls, value: list[str]) -> list[str]:
        doubled = sorted({label for label in value if value.count(label) > 1})
        if doubled:
            raise ValueError(f"labels are given once each: {', '.join(doubled)} twice")
        return value

    @field_validator("branch")
    @classmethod
    def _branch_is_a_ref(cls, value: str) -> str:
        if value and (
            value.startswith(("-", "/"))
            or ".." in value
            or value.endswith(("/", ".lock"))
            or re.search(r"[\s~^:?*\[\\]", value)
        ):
            raise ValueError(f"branch {value!r} is not a valid git branch name")
        return value

    @field_validator("cwd")
    @classmethod
    def _cwd_in_workspace(cls, value: str) -> str:
        return _workspace_path(value, "cwd")

    @field_validator("checkpoint_path")
    @classmethod
    def _checkpoint_in_workspace(cls, value: str) -> str:
        path = _workspace_path(value, "checkpoint_path")
        if path == "/workspace" or path.startswith("/workspace/agent/"):
            raise ValueError("checkpoint_path must be a file under /workspace, outside agent/")
        return path

    @field_validator("budget")
    @classmethod
    def _budget_bounded(cls, value: Budget) -> Budget:
        if value.max_hours > MAX_HOURS:
            raise ValueError(f"max_hours may be at most {MAX_HOURS} (a year)")
        if value.max_wait_hours > MAX_HOURS:
            raise ValueError(f"max_wait_hours may be at most {MAX_HOURS} (a year)")
        if value.max_restarts > MAX_RESTARTS:
            raise ValueError(f"max_restarts may be at most {MAX_RESTARTS}")
        if value.max_done_checks > MAX_DONE_CHECK_ROUNDS:
            raise ValueError(f"max_done_checks may be at most {MAX_DONE_CHECK_ROUNDS}")
        if value.max_ci_rounds > MAX_DONE_CHECK_ROUNDS:
            raise ValueError(f"max_ci_rounds may be at most {MAX_DONE_CHECK_ROUNDS}")
        if value.max_spend_usd is not None and value.max_spend_usd > MAX_SPEND_EXTENSION_USD:
            raise ValueError(f"max_spend_usd may be at most {MAX_SPEND_EXTENSION_USD}")
        return value

    @field_validator("done_when", "done_when_in_place")
    @classmethod
    def _done_when_commands(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return check_done_when(value, str(info.field_name))

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not re.match(ENV_NAME_PATTERN, name):
                raise ValueError(f"env name {name!r} is not a valid variable name")
            if name in RESERVED_ENV:
                raise ValueError(f"env may not set {name}: overnight sets it for the agent")
            if "\x00" in value[name]:
                raise ValueError(f"env value of {name} contains a NUL byte")
        return value

    @field_validator("repo_credential", "model_credential")
    @classmethod
    def _credential_name(cls, value: str, info: ValidationInfo) -> str:
        if value and not re.match(ENV_NAME_PATTERN, value):
            raise ValueError(f"{info.field_name} {value!r} is not a valid variable name")
        if value in RESERVED_ENV:
            raise ValueError(f"{info.field_name} may not name {value}")
        return value

    @field_validator("model_base_url")
    @classmethod
    def _model_base_url(cls, value: str) -> str:
        return check_http_base_url(value, "model_base_url")

    @field_validator("secret_env")
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.match(ENV_NAME_PATTERN, name):
                raise ValueError(f"secret_env name {name!r} is not a valid variable name")
            if name in RESERVED_ENV:
                raise ValueError(f"secret_env may not name {name}")
        return value

    @field_validator(
        "repo", "branch", "agent_dir", "command", "cwd", "checkpoint_path", mode="before"
    )
    @classmethod
    def _no_nul(cls, value: object) -> object:
        # A NUL byte cannot reach a process or a path; refuse it here, not in an activity.
        if isinstance(value, str) and "\x00" in value:
            raise ValueError("contains a NUL byte")
        return value

    @field_validator("repo", "agent_dir")
    @classmethod
    def _host_paths_absolute(cls, value: str, info: ValidationInfo) -> str:
        # One rule for every host path (overnight/spec_paths.py): a spec file's relative
        # paths were taken from its folder already; here a relative one has no folder.
        return check_host_path(value, str(info.field_name))

    @model_validator(mode="after")
    def _defaults_and_cross_checks(self) -> RunSpec:
        if not self.branch and self.run_id:
            self.branch = f"agent/{self.run_id}"
        if len(self.done_when) + len(self.done_when_in_place) > MAX_DONE_CHECKS:
            raise ValueError(
                f"done_when and done_when_in_place may hold at most {MAX_DONE_CHECKS} commands "
                "together"
            )
        overlap = set(self.env) & set(self.secret_env)
        if overlap:
            raise ValueError(f"{sorted(overlap)[0]} is in both env and secret_env")
        if self.repo_credential and self.repo_credential in [*self.env, *self.secret_env]:
            raise ValueError(
                f"repo_credential: {self.repo_credential} would reach the sandbox through env "
                "or secret_env; the gateway adds it, and only there is it kept from the agent"
            )
        if self.model_credential and self.model_credential in self.env:
            raise ValueError(
                f"model_credential: {self.model_credential} would reach the sandbox through env; "
                "the gateway adds it, and only there is it kept from the agent"
            )
        if self.model_base_url and self.agent is not None:
            raise ValueError(
                "model_base_url is for agents of your own; a coding agent's is agent.base_url"
            )
        if self.fresh_context_exit_code == 0:
            raise ValueError("fresh_context_exit_code may not be 0 (0 means finished)")
        check_agent_way(self.agent, self.agent_dir, self.command, self.fresh_context_exit_code)
        if traits(self.provider).api_ranges:
            _within_runtime_limits(self)
        mode = check_snapshot_mode(self.provider, self.snapshot_mode)
        if self.recovery == "snapshot":
            self.snapshot_mode = mode
        return self

    @field_validator("egress")
    @classmethod
    def _egress_patterns(cls, value: list[str]) -> list[str]:
        return check_egress(value)

    @model_validator(mode="after")
    def _binds_fit(self) -> RunSpec:
        check_binds(self.binds, self.provider)
        check_host_ports(self.host_ports, self.provider)
        check_spec_hosts(self.hosts, self.provider)
        if self.pull_request is not None:
            check_origin_for_pull_request(self.repo)
        return self


# What Runtime's API accepts (its reference, 0.2.0): refused here, where the user wrote it,
# rather than by the first create hours later.
RUNTIME_TIMEOUT_SECONDS = (60, 3600)
RUNTIME_MAX_VCPU = 16
RUNTIME_MEMORY_MIB = (128, 65536)
RUNTIME_MIN_DISK_MIB = 3072


def _within_runtime_limits(spec: RunSpec) -> None:
    # "<field>: <why>": the message names the field even though the check spans two.
    low, high = RUNTIME_TIMEOUT_SECONDS
    if not low <= spec.sandbox_timeout_seconds <= high:
        raise ValueError(
            f"sandbox_timeout_seconds: must be {low} to {high} on provider 'runtime' (a lease; "
            f"a progressing agent's is extended), got {spec.sandbox_timeout_seconds:g}"
        )
    if spec.vcpu > RUNTIME_MAX_VCPU:
        raise ValueError(f"vcpu: may be at most {RUNTIME_MAX_VCPU} on provider 'runtime'")
    low, high = RUNTIME_MEMORY_MIB
    if not low <= spec.memory_mib <= high:
        raise ValueError(f"memory_mib: must be {low} to {high} on provider 'runtime'")
    if spec.disk_mib is not None and spec.disk_mib < RUNTIME_MIN_DISK_MIB:
        raise ValueError(f"disk_mib: must be at least {RUNTIME_MIN_DISK_MIB} on provider 'runtime'")


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


class RunResult(_Strict):
    """What an `AgentRun` returns when it ends well."""

    run_id: str
    outcome: Literal["finished", "cancelled"]
    checkpoint: str | None = None
    checkpoint_json: JsonValue = None  # `checkpoint` parsed, when it is JSON (bounded)
    attempts: int
    restarts: int
    hours_used: float
    spend_usd: float
    # What the agent's `finish()` handed over, and the model spend it reported (in spend_usd).
    outputs: RunOutputs | None = None
    spend_model_usd: float = 0
    spend_model_source: Literal["gateway", "agent"] = "agent"
    safety_net: SafetyNet | None = None  # what the restarts cost (None: run begun before)
    # The done check's passing round (each command, its time and its output's tail), and the
    # failed rounds before it.
    done_checks: list[DoneCheck] = Field(default_factory=list)
    done_checks_used: int = 0
    # Connections its sandboxes' network refused, per host asked for, most first.
    egress_refused: dict[str, int] = Field(default_factory=dict)
    # The commit the run's branch on the origin holds, seen there by the worker (None: a run
    # begun before its finish pushed, or cancelled), and its pull request's address.
    pushed_commit: str | None = None
    pull_request_url: str | None = None
    # CI rounds (`pull_request.until_checks_pass`): the commit watched, where its checks
    # stand, the rounds used and the check that failed last (None: the run watches no CI).
    ci: CiView | None = None
