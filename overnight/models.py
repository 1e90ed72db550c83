"""The public contracts of an overnight run: what goes in, what a person sees, what comes out.

The one place to import them from (`from overnight.models import RunSpec, RunStatus`); each
lives in a module of its own concern, re-exported here by name:

- `overnight/run_spec.py`: `RunSpec`, what goes in, and its checks;
- `overnight/runtime_limits.py`: the sizes Runtime's API accepts, which a spec is held to;
- `overnight/run_status.py`: `RunStatus` and its records, what a person sees;
- `overnight/run_result.py`: `RunResult`, what comes out;
- `overnight/model_base.py`: the budget, the rates, the run states and the bounds.

The other names (the parts of the spec and their bounds and checks) stay importable from here
as they were before the split. These models cross the wire through `pydantic_data_converter`,
so they are plain data: no methods that do I/O, and nothing that may not be serialised into
workflow history.
"""

from __future__ import annotations

from overnight.agent_requests import AgentTalk as AgentTalk
from overnight.agent_requests import RunOutputs as RunOutputs
from overnight.agent_spec import CodingAgent as CodingAgent
from overnight.agent_spec import check_agent_way as check_agent_way
from overnight.agent_spec import check_http_base_url as check_http_base_url
from overnight.ci_rounds import CiView as CiView
from overnight.done_check import DEFAULT_DONE_CHECK_SECONDS as DEFAULT_DONE_CHECK_SECONDS
from overnight.done_check import MAX_DONE_CHECK_ROUNDS as MAX_DONE_CHECK_ROUNDS
from overnight.done_check import MAX_DONE_CHECK_SECONDS as MAX_DONE_CHECK_SECONDS
from overnight.done_check import MAX_DONE_CHECKS as MAX_DONE_CHECKS
from overnight.done_check import DoneCheck as DoneCheck
from overnight.done_check import check_done_when as check_done_when
from overnight.egress import MAX_EGRESS as MAX_EGRESS
from overnight.egress import Network as Network
from overnight.egress import check_egress as check_egress
from overnight.hosts import MAX_SPEC_HOSTS as MAX_SPEC_HOSTS
from overnight.hosts import check_spec_hosts as check_spec_hosts
from overnight.isolation import MAX_BINDS as MAX_BINDS
from overnight.isolation import MAX_HOST_PORTS as MAX_HOST_PORTS
from overnight.isolation import HostBind as HostBind
from overnight.isolation import Isolation as Isolation
from overnight.isolation import check_binds as check_binds
from overnight.isolation import check_host_ports as check_host_ports
from overnight.model_base import ENV_NAME_PATTERN as ENV_NAME_PATTERN
from overnight.model_base import MAX_ATTENTION_HOURS as MAX_ATTENTION_HOURS
from overnight.model_base import MAX_CHECKPOINT_BYTES as MAX_CHECKPOINT_BYTES
from overnight.model_base import MAX_DISK_MIB as MAX_DISK_MIB
from overnight.model_base import MAX_FRESH_STARTS as MAX_FRESH_STARTS
from overnight.model_base import MAX_HOURS as MAX_HOURS
from overnight.model_base import MAX_MEMORY_MIB as MAX_MEMORY_MIB
from overnight.model_base import MAX_POLL_SECONDS as MAX_POLL_SECONDS
from overnight.model_base import MAX_RESTARTS as MAX_RESTARTS
from overnight.model_base import MAX_RUN_LABELS as MAX_RUN_LABELS
from overnight.model_base import MAX_SECONDS as MAX_SECONDS
from overnight.model_base import MAX_SPEND_EXTENSION_USD as MAX_SPEND_EXTENSION_USD
from overnight.model_base import MAX_STALL_SECONDS as MAX_STALL_SECONDS
from overnight.model_base import MIN_DISK_MIB as MIN_DISK_MIB
from overnight.model_base import RESERVED_ENV as RESERVED_ENV
from overnight.model_base import RUN_ID_PATTERN as RUN_ID_PATTERN
from overnight.model_base import RUN_ID_PATTERN_OR_EMPTY as RUN_ID_PATTERN_OR_EMPTY
from overnight.model_base import Budget as Budget
from overnight.model_base import BudgetExtension as BudgetExtension
from overnight.model_base import KeepDays as KeepDays
from overnight.model_base import Label as Label
from overnight.model_base import Owner as Owner
from overnight.model_base import PositiveHours as PositiveHours
from overnight.model_base import PositiveSeconds as PositiveSeconds
from overnight.model_base import Priority as Priority
from overnight.model_base import Provider as Provider
from overnight.model_base import Rates as Rates
from overnight.model_base import RunState as RunState
from overnight.notify_spec import MAX_WEBHOOKS as MAX_WEBHOOKS
from overnight.notify_spec import Webhook as Webhook
from overnight.notify_spec import webhooks_from_input as webhooks_from_input
from overnight.provider_traits import traits as traits
from overnight.pull_request_spec import PullRequestSpec as PullRequestSpec
from overnight.pull_request_spec import (
    check_origin_for_pull_request as check_origin_for_pull_request,
)
from overnight.run_costs import SafetyNet as SafetyNet
from overnight.run_result import RunResult as RunResult
from overnight.run_spec import RunSpec as RunSpec
from overnight.run_status import CheckpointSummary as CheckpointSummary
from overnight.run_status import DailyLimit as DailyLimit
from overnight.run_status import LastWords as LastWords
from overnight.run_status import RestartRecord as RestartRecord
from overnight.run_status import RunStatus as RunStatus
from overnight.run_status import SnapshotRecord as SnapshotRecord
from overnight.runtime_limits import RUNTIME_MAX_VCPU as RUNTIME_MAX_VCPU
from overnight.runtime_limits import RUNTIME_MEMORY_MIB as RUNTIME_MEMORY_MIB
from overnight.runtime_limits import RUNTIME_MIN_DISK_MIB as RUNTIME_MIN_DISK_MIB
from overnight.runtime_limits import RUNTIME_TIMEOUT_SECONDS as RUNTIME_TIMEOUT_SECONDS
from overnight.snapshot_spec import Recovery as Recovery
from overnight.snapshot_spec import SnapshotMode as SnapshotMode
from overnight.snapshot_spec import check_snapshot_mode as check_snapshot_mode
from overnight.spec_paths import check_host_path as check_host_path
from overnight.workspace_spec import DEFAULT_WORKSPACE_MIB as DEFAULT_WORKSPACE_MIB
from overnight.workspace_spec import MAX_WORKSPACE_MIB as MAX_WORKSPACE_MIB
from overnight.workspace_spec import WorkspaceView as WorkspaceView
