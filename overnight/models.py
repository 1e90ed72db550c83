"""The public import path of overnight's models, kept for users:

    from overnight.models import BudgetExtension, RunResult, RunSpec, RunStatus

(docs/from-your-code.md, examples/from_your_code/run.py). The models live in the ground,
`overnight.core.models`; this re-exports every name that exports, the same objects.
overnight's own code imports `overnight.core.models`, never this (.importlinter,
tests/ground/test_public_paths.py).
"""

from __future__ import annotations

from overnight.core.models import DEFAULT_DONE_CHECK_SECONDS as DEFAULT_DONE_CHECK_SECONDS
from overnight.core.models import DEFAULT_WORKSPACE_MIB as DEFAULT_WORKSPACE_MIB
from overnight.core.models import ENV_NAME_PATTERN as ENV_NAME_PATTERN
from overnight.core.models import MAX_ATTENTION_HOURS as MAX_ATTENTION_HOURS
from overnight.core.models import MAX_BINDS as MAX_BINDS
from overnight.core.models import MAX_CHECKPOINT_BYTES as MAX_CHECKPOINT_BYTES
from overnight.core.models import MAX_DISK_MIB as MAX_DISK_MIB
from overnight.core.models import MAX_DONE_CHECK_ROUNDS as MAX_DONE_CHECK_ROUNDS
from overnight.core.models import MAX_DONE_CHECK_SECONDS as MAX_DONE_CHECK_SECONDS
from overnight.core.models import MAX_DONE_CHECKS as MAX_DONE_CHECKS
from overnight.core.models import MAX_EGRESS as MAX_EGRESS
from overnight.core.models import MAX_FRESH_STARTS as MAX_FRESH_STARTS
from overnight.core.models import MAX_HOST_PORTS as MAX_HOST_PORTS
from overnight.core.models import MAX_HOURS as MAX_HOURS
from overnight.core.models import MAX_MEMORY_MIB as MAX_MEMORY_MIB
from overnight.core.models import MAX_POLL_SECONDS as MAX_POLL_SECONDS
from overnight.core.models import MAX_RESTARTS as MAX_RESTARTS
from overnight.core.models import MAX_RUN_LABELS as MAX_RUN_LABELS
from overnight.core.models import MAX_SECONDS as MAX_SECONDS
from overnight.core.models import MAX_SPEC_HOSTS as MAX_SPEC_HOSTS
from overnight.core.models import MAX_SPEND_EXTENSION_USD as MAX_SPEND_EXTENSION_USD
from overnight.core.models import MAX_STALL_SECONDS as MAX_STALL_SECONDS
from overnight.core.models import MAX_WEBHOOKS as MAX_WEBHOOKS
from overnight.core.models import MAX_WORKSPACE_MIB as MAX_WORKSPACE_MIB
from overnight.core.models import MIN_DISK_MIB as MIN_DISK_MIB
from overnight.core.models import RESERVED_ENV as RESERVED_ENV
from overnight.core.models import RUN_ID_PATTERN as RUN_ID_PATTERN
from overnight.core.models import RUN_ID_PATTERN_OR_EMPTY as RUN_ID_PATTERN_OR_EMPTY
from overnight.core.models import RUNTIME_MAX_VCPU as RUNTIME_MAX_VCPU
from overnight.core.models import RUNTIME_MEMORY_MIB as RUNTIME_MEMORY_MIB
from overnight.core.models import RUNTIME_MIN_DISK_MIB as RUNTIME_MIN_DISK_MIB
from overnight.core.models import RUNTIME_TIMEOUT_SECONDS as RUNTIME_TIMEOUT_SECONDS
from overnight.core.models import AgentTalk as AgentTalk
from overnight.core.models import Budget as Budget
from overnight.core.models import BudgetExtension as BudgetExtension
from overnight.core.models import CheckpointSummary as CheckpointSummary
from overnight.core.models import CiView as CiView
from overnight.core.models import CodingAgent as CodingAgent
from overnight.core.models import DailyLimit as DailyLimit
from overnight.core.models import DoneCheck as DoneCheck
from overnight.core.models import HostBind as HostBind
from overnight.core.models import Isolation as Isolation
from overnight.core.models import KeepDays as KeepDays
from overnight.core.models import Label as Label
from overnight.core.models import LastWords as LastWords
from overnight.core.models import Network as Network
from overnight.core.models import Owner as Owner
from overnight.core.models import PositiveHours as PositiveHours
from overnight.core.models import PositiveSeconds as PositiveSeconds
from overnight.core.models import Priority as Priority
from overnight.core.models import Provider as Provider
from overnight.core.models import PullRequestSpec as PullRequestSpec
from overnight.core.models import Rates as Rates
from overnight.core.models import Recovery as Recovery
from overnight.core.models import RestartRecord as RestartRecord
from overnight.core.models import RunOutputs as RunOutputs
from overnight.core.models import RunResult as RunResult
from overnight.core.models import RunSpec as RunSpec
from overnight.core.models import RunState as RunState
from overnight.core.models import RunStatus as RunStatus
from overnight.core.models import SafetyNet as SafetyNet
from overnight.core.models import SnapshotMode as SnapshotMode
from overnight.core.models import SnapshotRecord as SnapshotRecord
from overnight.core.models import Webhook as Webhook
from overnight.core.models import WorkspaceView as WorkspaceView
from overnight.core.models import check_agent_way as check_agent_way
from overnight.core.models import check_binds as check_binds
from overnight.core.models import check_done_when as check_done_when
from overnight.core.models import check_egress as check_egress
from overnight.core.models import check_host_path as check_host_path
from overnight.core.models import check_host_ports as check_host_ports
from overnight.core.models import check_http_base_url as check_http_base_url
from overnight.core.models import check_origin_for_pull_request as check_origin_for_pull_request
from overnight.core.models import check_snapshot_mode as check_snapshot_mode
from overnight.core.models import check_spec_hosts as check_spec_hosts
from overnight.core.models import traits as traits
from overnight.core.models import webhooks_from_input as webhooks_from_input
