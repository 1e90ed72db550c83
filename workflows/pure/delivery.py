"""A finished run's delivery: what it means for the run that its work must be on the origin
(and, with `RunSpec.pull_request`, proposed) before it finishes. Pure (no temporalio, no I/O).

A run begun with the marker (`SupervisorState.delivery.finish_pushes`) finishes only once the
worker saw its branch on the origin hold its final commit, then its pull request opened. A
push or a pull request that cannot be made waits for a person (`delivery_waits`), the sandbox
paused where it stands with the work in it; any extension tries again (`DeliverAgain`). Until
the origin holds it, no commit is named as the run's output: the agent's word (`outputs.values
["commit"]`) is shown only once it is the commit the branch holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from activities.models.delivery import RunFacts
from overnight.core.agent_requests import RunOutputs
from workflows.pure import budget, model_books, safety_net
from workflows.pure.state import SupervisorState

# The output the agent names its commit by (the coding agents' adapter does).
COMMIT_OUTPUT = "commit"
# How a reason a person reads begins, for a push and for a pull request.
NOT_PUSHED = "the run's work is not on the origin: "
NO_PULL_REQUEST = "the pull request could not be opened: "


@dataclass(frozen=True)
class DeliverAgain:
    """A person extended a run whose push or pull request waits: try it again, then finish."""


def waiting(state: SupervisorState) -> bool:
    """A push or a pull request waits for a person, the sandbox kept."""
    return state.delivery.delivery_waits is not None and state.sandbox_id is not None


def work_only_in_sandbox(state: SupervisorState) -> bool:
    """The run's work has not reached the origin: its sandbox must not be stopped."""
    return state.delivery.finish_pushes and state.delivery.delivery_waits == "push"


def wants_pull_request(state: SupervisorState) -> bool:
    return state.spec.pull_request is not None and state.delivery.pull_request_url is None


def push_reason(said: str) -> str:
    """Why the run waits for a person, in the activity's words when they say it already."""
    if said.startswith(("the origin ", "the run's work ", "the push ")):
        return said
    return NOT_PUSHED + said


def pull_request_reason(said: str) -> str:
    return said if said.startswith(NO_PULL_REQUEST) else NO_PULL_REQUEST + said


def run_facts(state: SupervisorState, now: datetime) -> RunFacts:
    """What the pull request's body says of the run (no restart's output: its reason says)."""
    outputs = state.kit.outputs
    return RunFacts(
        run_id=state.spec.run_id,
        summary=outputs.summary if outputs is not None else "",
        title=state.spec.pull_request.title if state.spec.pull_request is not None else "",
        done_checks=list(state.done.done_results),
        attempts=max(1, state.attempt),
        restarts=[r.model_copy(update={"output_tail": None}) for r in state.attempts.restarts],
        fresh_starts=state.attempts.fresh_starts_used,
        hours_used=round(budget.hours_used(state, now), 4),
        spend_usd=round(budget.spend_usd(state, now), 4),
        spend_model_usd=round(model_books.model_spend_usd(state), 4),
        safety_net=safety_net.summary(state, now),
        kept=[kept for kept in state.workspace.workspace_kept if kept.outcome == "pushed"],
        ci_rounds=state.ci.ci_rounds_used,
        ci_failed=list(state.ci.ci_failed),
    )


def shown_outputs(state: SupervisorState) -> RunOutputs | None:
    """The agent's outputs as the status, the result and the notifications show them: for a
    run whose finish pushes, its named commit is the one the origin's branch holds, and none
    before the origin holds it."""
    outputs = state.kit.outputs
    if outputs is None or not state.delivery.finish_pushes or COMMIT_OUTPUT not in outputs.values:
        return outputs
    values = dict(outputs.values)
    if state.delivery.pushed_commit is None:
        del values[COMMIT_OUTPUT]
    else:
        values[COMMIT_OUTPUT] = state.delivery.pushed_commit
    return outputs.model_copy(update={"values": values})
