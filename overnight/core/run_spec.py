"""The run's spec (`RunSpec`): everything needed to start one supervised agent run, and the
checks it is held to where the user wrote it (a field at a time, then across fields).

The largest of the contracts and the one every new feature adds a field to, so it has a
module of its own; `overnight.core.models` re-exports it with the rest, and callers import it
from there. It crosses the wire as plain data (see `overnight.core.models`).
"""

from __future__ import annotations

import posixpath
import re

from pydantic import Field, ValidationInfo, field_validator, model_validator

from overnight.core.agent_spec import CodingAgent, check_agent_way, check_http_base_url
from overnight.core.done_check import (
    DEFAULT_DONE_CHECK_SECONDS,
    MAX_DONE_CHECK_ROUNDS,
    MAX_DONE_CHECK_SECONDS,
    MAX_DONE_CHECKS,
    check_done_when,
)
from overnight.core.egress import MAX_EGRESS, Network, check_egress
from overnight.core.hosts import MAX_SPEC_HOSTS, check_spec_hosts
from overnight.core.isolation import (
    MAX_BINDS,
    MAX_HOST_PORTS,
    HostBind,
    Isolation,
    check_binds,
    check_host_ports,
)
from overnight.core.model_base import (
    ENV_NAME_PATTERN,
    MAX_ATTENTION_HOURS,
    MAX_CHECKPOINT_BYTES,
    MAX_DISK_MIB,
    MAX_FRESH_STARTS,
    MAX_HOURS,
    MAX_MEMORY_MIB,
    MAX_POLL_SECONDS,
    MAX_RESTARTS,
    MAX_RUN_LABELS,
    MAX_SPEND_EXTENSION_USD,
    MAX_STALL_SECONDS,
    MIN_DISK_MIB,
    RESERVED_ENV,
    RUN_ID_PATTERN_OR_EMPTY,
    Budget,
    KeepDays,
    Label,
    Owner,
    PositiveSeconds,
    Priority,
    Provider,
    Rates,
    _StrictInput,
)
from overnight.core.notify_spec import MAX_WEBHOOKS, Webhook, webhooks_from_input
from overnight.core.provider_traits import traits
from overnight.core.pull_request_spec import PullRequestSpec, check_origin_for_pull_request
from overnight.core.runtime_limits import check_runtime_limits
from overnight.core.snapshot_spec import Recovery, SnapshotMode, check_snapshot_mode
from overnight.core.spec_paths import check_host_path
from overnight.core.workspace_spec import DEFAULT_WORKSPACE_MIB, MAX_WORKSPACE_MIB


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
    # overnight/core/agent_spec.py), or one of your own (`agent_dir` uploaded, `command` run):
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
    # How a restart recovers (see overnight/core/snapshot_spec.py and docs/snapshots.md):
    # "checkpoint" (clone, upload, checkpoint) or "snapshot" (the latest ready snapshot of the
    # sandbox).
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
    # The done check (overnight/core/done_check.py): commands that must all pass after the agent
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
    # latest (overnight/core/workspace_spec.py). A keep that would push more than
    # `max_workspace_mib` is not pushed (the status says so) and the run goes on.
    keep_workspace: bool = False
    max_workspace_mib: int = Field(default=DEFAULT_WORKSPACE_MIB, ge=1, le=MAX_WORKSPACE_MIB)
    # The pull request the run opens once its work is on the origin (None: none;
    # overnight/core/pull_request_spec.py, docs/pull-requests.md).
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
        # One rule for every host path (overnight/core/spec_paths.py): a spec file's relative
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
            check_runtime_limits(
                sandbox_timeout_seconds=self.sandbox_timeout_seconds,
                vcpu=self.vcpu,
                memory_mib=self.memory_mib,
                disk_mib=self.disk_mib,
            )
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
