"""An AgentRun from an incompatible deploy, for `overnight replay-check`'s tests (kept apart:
the workflow sandbox re-imports the module a workflow lives in, and test modules import things
it must not run).

It is registered under the real type name `AgentRun` but commands something else first (a
timer, where AgentRun's first workflow task records its patch marker and asks for activities),
as a change made without `workflow.patched` would. Its histories do not replay on AgentRun,
and AgentRun's do not replay on it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow


@workflow.defn(name="AgentRun")
class DivergentAgentRun:
    @workflow.run
    async def run(self, spec: dict[str, Any]) -> str:
        await workflow.sleep(timedelta(milliseconds=200), summary="a timer AgentRun never starts")
        return f"divergent {spec.get('run_id', '')}"
