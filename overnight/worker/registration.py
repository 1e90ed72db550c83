"""What the worker registers for workflow code, in one place, so that `overnight replay-check`
replays histories exactly as a worker of this tree would run them: the same workflow classes,
the same workflow runner, the client's data converter (its payload codec too) and the
interceptors and plugins a worker takes from its client, plus any of its own.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from temporalio.client import Client
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.worker import Interceptor, Plugin, Replayer

from overnight.worker.workflow_runner import shared_module_runner


def registered_workflows() -> list[type]:
    """The workflow classes every overnight worker registers."""
    # Imported here so that modules needing only the client (the CLI) do not load workflows.
    from workflows.admission_run import OvernightAdmission
    from workflows.agent_run import AgentRun
    from workflows.notify_run import NotifyRun
    from workflows.reap_run import ReapRun

    return [AgentRun, NotifyRun, ReapRun, OvernightAdmission]


def registered_workflow_types() -> list[str]:
    """The workflow type names of `registered_workflows()`, as histories record them."""
    from overnight.core.admission import ADMISSION_WORKFLOW
    from overnight.core.constants import WORKFLOW_TYPE
    from workflows.notify_steps import NOTIFY_WORKFLOW
    from workflows.reap_run import REAP_WORKFLOW

    return [WORKFLOW_TYPE, NOTIFY_WORKFLOW, REAP_WORKFLOW, ADMISSION_WORKFLOW]


def worker_interceptors() -> list[Interceptor]:
    """Interceptors the worker adds beyond those it inherits from its client (none today)."""
    return []


def replayer_for(client: Client, workflows: Sequence[type] | None = None) -> Replayer:
    """A replayer that runs workflow code as a worker on `client` would.

    A `Worker` takes the client's interceptors and plugins that are also worker ones; a
    `Replayer` has no client, so they are handed over here. `workflows` replaces the registered
    classes (a test replays against a deliberately different one). The replayer's own runtime
    logs nothing: the SDK core would print each divergence to stdout as a warning, and the
    caller reports them (`WorkflowReplayResult.replay_failure`)."""
    config = client.config()
    inherited = [each for each in config.get("interceptors", []) if isinstance(each, Interceptor)]
    plugins = [each for each in config.get("plugins", []) if isinstance(each, Plugin)]
    return Replayer(
        workflows=list(workflows) if workflows is not None else registered_workflows(),
        workflow_runner=shared_module_runner(),
        namespace=client.namespace,
        data_converter=client.data_converter,
        interceptors=[*inherited, *worker_interceptors()],
        plugins=plugins,
        runtime=_quiet_runtime(),
    )


@functools.cache
def _quiet_runtime() -> Runtime:
    """One runtime for every replayer in this process (each runtime holds its own threads)."""
    return Runtime(telemetry=TelemetryConfig(logging=None, metrics=None))
