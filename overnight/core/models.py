"""The public contracts of an overnight run: what goes in, what a person sees, what comes out.

The one place overnight's code imports them from (`from overnight.core.models import RunSpec`);
users import the same objects from `overnight.models`, the public path (overnight/models.py).
Each lives in a module of its own concern, re-exported here by name:

- `overnight/core/run_spec.py`: `RunSpec`, what goes in, and its checks;
- `overnight/core/runtime_limits.py`: the sizes Runtime's API accepts, which a spec is held to;
- `overnight/core/run_status.py`: `RunStatus` and its records, what a person sees;
- `overnight/core/run_result.py`: `RunResult`, what comes out;
- `overnight/core/model_base.py`: the budget, the rates, the run states and the bounds.

The other names (the parts of the spec and their bounds and checks) stay importable from here
as they were before the split. These models cross the wire through `pydantic_data_converter`,
so they are plain data: no methods that do I/O, and nothing that may not be serialised into
workflow history.
"""

from __future__ import annotations

from overnight.core.agent_requests import AgentTalk as AgentTalk
from overnight.core.agent_requests import RunOutputs as RunOutputs
from overnight.core.agent_spec import CodingAgent as CodingAgent
from overnight.core.agent_spec import check_agent_way as check_agent_way
from overnight.core.agent_spec import check_http_base_url as check_http_base_url
from overnight.core.ci_rounds import CiView as CiView
from overnight.core.done_check import DEFAULT_DONE_CHECK_SECONDS as DEFAULT_DONE_CHECK_SECONDS
from overnight.core.done_check import MAX_DONE_CHECK_ROUNDS as MAX_DONE_CHECK_ROUNDS
from overnight.core.done_check import MAX_DONE_CHECK_SECONDS as MAX_DONE_CHECK_SECONDS
from overnight.core.done_check import MAX_DONE_CHECKS as MAX_DONE_CHECKS
from overnight.core.done_check import DoneCheck as DoneCheck
from overnight.core.done_check import check_done_when as check_done_when
from overnight.core.egress import MAX_EGRESS as MAX_EGRESS
from overnight.core.egress import Network as Network
from overnight.core.egress import check_egress as check_egress
from overnight.core.hosts import MAX_SPEC_HOSTS as MAX_SPEC_HOSTS
from overnight.core.hosts import check_spec_hosts as check_spec_hosts
from overnight.core.isolation import MAX_BINDS as MAX_BINDS
from overnight.core.isolation import MAX_HOST_PORTS as MAX_HOST_PORTS
from overnight.core.isolation import HostBind as HostBind
from overnight.core.isolation import Isolation as Isolation
from overnight.core.isolation import check_binds as check_binds
from overnight.core.isolation import check_host_ports as check_host_ports
from overnight.core.model_base import ENV_NAME_PATTERN as ENV_NAME_PATTERN
from overnight.core.model_base import MAX_ATTENTION_HOURS as MAX_ATTENTION_HOURS
from overnight.core.model_base import MAX_CHECKPOINT_BYTES as MAX_CHECKPOINT_BYTES
from overnight.core.model_base import MAX_DISK_MIB as MAX_DISK_MIB
from overnight.core.model_base import MAX_FRESH_STARTS as MAX_FRESH_STARTS
from overnight.core.model_base import MAX_HOURS as MAX_HOURS
from overnight.core.model_base import MAX_MEMORY_MIB as MAX_MEMORY_MIB
from overnight.core.model_base import MAX_POLL_SECONDS as MAX_POLL_SECONDS
from overnight.core.model_base import MAX_RESTARTS as MAX_RESTARTS
from overnight.core.model_base import MAX_RUN_LABELS as MAX_RUN_LABELS
from overnight.core.model_base import MAX_SECONDS as MAX_SECONDS
from overnight.core.model_base import MAX_SPEND_EXTENSION_USD as MAX_SPEND_EXTENSION_USD
from overnight.core.model_base import MAX_STALL_SECONDS as MAX_STALL_SECONDS
from overnight.core.model_base import MIN_DISK_MIB as MIN_DISK_MIB
from overnight.core.model_base import RESERVED_ENV as RESERVED_ENV
from overnight.core.model_base import RUN_ID_PATTERN as RUN_ID_PATTERN
from overnight.core.model_base import RUN_ID_PATTERN_OR_EMPTY as RUN_ID_PATTERN_OR_EMPTY
from overnight.core.model_base import Budget as Budget
from overnight.core.model_base import BudgetExtension as BudgetExtension
from overnight.core.model_base import KeepDays as KeepDays
from overnight.core.model_base import Label as Label
from overnight.core.model_base import Owner as Owner
from overnight.core.model_base import PositiveHours as PositiveHours
from overnight.core.model_base import PositiveSeconds as PositiveSeconds
from overnight.core.model_base import Priority as Priority
from overnight.core.model_base import Provider as Provider
from overnight.core.model_base import Rates as Rates
from overnight.core.model_base import RunState as RunState
from overnight.core.notify_spec import MAX_WEBHOOKS as MAX_WEBHOOKS
from overnight.core.notify_spec import Webhook as Webhook
from overnight.core.notify_spec import webhooks_from_input as webhooks_from_input
from overnight.core.provider_traits import traits as traits
from overnight.core.pull_request_spec import PullRequestSpec as PullRequestSpec
from overnight.core.pull_request_spec import (
    check_origin_for_pull_request as check_origin_for_pull_request,
)
from overnight.core.run_costs import SafetyNet as SafetyNet
from overnight.core.run_result import RunResult as RunResult
from overnight.core.run_spec import RunSpec as RunSpec
from overnight.core.run_status import CheckpointSummary as CheckpointSummary
from overnight.core.run_status import DailyLimit as DailyLimit
from overnight.core.run_status import LastWords as LastWords
from overnight.core.run_status import RestartRecord as RestartRecord
from overnight.core.run_status import RunStatus as RunStatus
from overnight.core.run_status import SnapshotRecord as SnapshotRecord
from overnight.core.runtime_limits import RUNTIME_MAX_VCPU as RUNTIME_MAX_VCPU
from overnight.core.runtime_limits import RUNTIME_MEMORY_MIB as RUNTIME_MEMORY_MIB
from overnight.core.runtime_limits import RUNTIME_MIN_DISK_MIB as RUNTIME_MIN_DISK_MIB
from overnight.core.runtime_limits import RUNTIME_TIMEOUT_SECONDS as RUNTIME_TIMEOUT_SECONDS
from overnight.core.snapshot_spec import Recovery as Recovery
from overnight.core.snapshot_spec import SnapshotMode as SnapshotMode
from overnight.core.snapshot_spec import check_snapshot_mode as check_snapshot_mode
from overnight.core.spec_paths import check_host_path as check_host_path
from overnight.core.workspace_spec import DEFAULT_WORKSPACE_MIB as DEFAULT_WORKSPACE_MIB
from overnight.core.workspace_spec import MAX_WORKSPACE_MIB as MAX_WORKSPACE_MIB
from overnight.core.workspace_spec import WorkspaceView as WorkspaceView
