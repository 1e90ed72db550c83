"""How the worker runs workflow code: Temporal's sandbox, with overnight's own modules shared.

By default the sandbox imports a workflow's module afresh for every run it holds in its cache
(with `datetime`, `asyncio` and a `__main__` of its own), about 75 KiB a run; `workflows.*`
modules other than `agent_run` were already passed through. Passing overnight's packages
through too shares one copy among all runs (measured in-process at 500 runs: 368 -> 174 MiB
of RSS per 1,000 runs; see docs/performance.md). What is given up: the sandbox no longer
catches a non-deterministic call (`datetime.now()`, I/O) made in `workflows/agent_run.py` at
run time on this worker. The workflow tests and the replay of recorded histories still run
AgentRun in the full sandbox (they build their workers without this runner), and
`workflows.*` modules hold no mutable module state for runs to share.
"""

from __future__ import annotations

from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

SHARED_PACKAGES = ("workflows", "activities", "overnight")


def shared_module_runner() -> WorkflowRunner:
    """The sandbox with overnight's packages passed through (one copy for every run)."""
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*SHARED_PACKAGES)
    return SandboxedWorkflowRunner(restrictions=restrictions)
