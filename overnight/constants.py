"""Names and numbers that several parts of overnight must agree on."""

from __future__ import annotations

TASK_QUEUE = "overnight"
WORKFLOW_TYPE = "AgentRun"
DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"

# Sandbox labels: every sandbox a run creates carries them, so `overnight reap` can find it.
LABEL_RUN = "overnight-run"
LABEL_ATTEMPT = "overnight-attempt"

# Search attributes (registered by the dev server from temporal-dev.yaml).
SA_STATE = "OvernightState"
SA_RESTARTS = "OvernightRestarts"
SA_SANDBOX = "OvernightSandbox"
SA_LAST_PROGRESS = "OvernightLastProgress"
SEARCH_ATTRIBUTE_TYPES = {
    SA_STATE: "Keyword",
    SA_RESTARTS: "Int",
    SA_SANDBOX: "Keyword",
    SA_LAST_PROGRESS: "Datetime",
}

# Where sandboxes see their files.
WORKSPACE = "/workspace"
AGENT_MOUNT = "/workspace/agent"
# The agent kit (`overnight_agent`, overnight/agent_kit/) in every sandbox, on PYTHONPATH.
KIT_MOUNT = "/workspace/.overnight/kit"
