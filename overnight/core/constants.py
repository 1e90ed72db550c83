"""Names and numbers that several parts of overnight must agree on."""

from __future__ import annotations

TASK_QUEUE = "overnight"
WORKFLOW_TYPE = "AgentRun"
DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"

# Sandbox labels: every sandbox a run creates carries them, so `overnight reap` can find it.
LABEL_RUN = "overnight-run"
LABEL_ATTEMPT = "overnight-attempt"
# On a done check's own sandbox (`{run_id}-check-{n}`) instead of an attempt: its number n.
LABEL_CHECK = "overnight-check"
# On a sandbox kept paused after its run ended: when `overnight reap` may delete it
# (overnight.core.retention).
LABEL_KEEP_UNTIL = "overnight-keep-until"
# Snapshots carry LABEL_RUN too, and their number in the run.
LABEL_SNAPSHOT = "overnight-snapshot"
# Where the supervisor answers an agent's snapshot request (see the agent kit's
# `snapshot_here()`): JSON {"request", "state", "snapshot_id"}.
SNAPSHOT_ANSWER = "/workspace/.overnight/snapshot.json"
# The checkpoint key an agent asks for a snapshot with: a number greater than the last asked.
SNAPSHOT_REQUEST_KEY = "snapshot_request"
# How the pause reason of a sandbox whose files passed their disk limit begins (local sandboxes
# measured by the worker: "disk limit of 64 MiB reached (1,088 MiB used)"): its run then
# needs attention rather than a restart that would fill a new sandbox the same way.
DISK_LIMIT_REASON = "disk limit of {mib} MiB reached"
DISK_LIMIT_PREFIX = "disk limit of "
# How the pause reason of a local sandbox paused because its host's disk went below the
# worker's floor of free space begins (activities/providers/local/host_floor.py): its run then
# needs attention with the sandbox paused where it stands (an extension wakes the same agent).
HOST_FLOOR_PREFIX = "host disk below the floor"
HOST_FLOOR_REASON = (
    HOST_FLOOR_PREFIX + ": only {free} MiB free on the filesystem of {home}, under this "
    "worker's floor of {floor} MiB ({setting})"
)

# Search attributes (registered by the dev server from temporal-dev.yaml).
SA_STATE = "OvernightState"
SA_RESTARTS = "OvernightRestarts"
SA_SANDBOX = "OvernightSandbox"
SA_LAST_PROGRESS = "OvernightLastProgress"
# What the console filters its runs list by (issue 52): set once, at a run's first publish,
# by runs begun with `ROW_PATCH` (workflows/patches.py). Readable without the codec keys,
# like the four above: the spec's `owner`, its `labels`, and its agent's kind ("own" for an
# agent of one's own, `agent_dir` + `command`).
SA_OWNER = "OvernightOwner"
SA_AGENT = "OvernightAgent"
SA_LABELS = "OvernightLabels"
SEARCH_ATTRIBUTE_TYPES = {
    SA_STATE: "Keyword",
    SA_RESTARTS: "Int",
    SA_SANDBOX: "Keyword",
    SA_LAST_PROGRESS: "Datetime",
    SA_OWNER: "Keyword",
    SA_AGENT: "Keyword",
    SA_LABELS: "KeywordList",
}
# The memo key of a run's row (overnight/core/run_row.py): what the console's runs list shows of
# it without asking each run (encrypted with the payloads, unlike search attributes).
ROW_MEMO_KEY = "overnight.row"

# Where sandboxes see their files.
WORKSPACE = "/workspace"
AGENT_MOUNT = "/workspace/agent"
# The agent kit (`overnight_agent`, overnight/agent_kit/) in every sandbox, on PYTHONPATH.
KIT_MOUNT = "/workspace/.overnight/kit"
