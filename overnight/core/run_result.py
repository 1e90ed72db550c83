"""What a run hands back when it ends well (`RunResult`): the workflow's return value.

Apart from the status because it is a contract of its own (what a client's `result()` reads,
kept in workflow history); `overnight.core.models` re-exports it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from overnight.core.agent_requests import RunOutputs
from overnight.core.ci_rounds import CiView
from overnight.core.done_check import DoneCheck
from overnight.core.model_base import _Strict
from overnight.core.run_costs import SafetyNet


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
