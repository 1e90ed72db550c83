"""The Python API for people and programs driving overnight runs; the CLI is a thin layer over it.

Each function takes a connected `temporalio.client.Client` (see `overnight.core.connect`) and talks
to the `AgentRun` workflow by its documented names: signals `cancel` and `extend_budget`,
query `status`, and `extend_budget` as an update too.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import (
    Priority,
    SearchAttributeKey,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from overnight.cli.run_names import workflow_id_of as workflow_id_of
from overnight.cli.spec_size import too_large
from overnight.core.connect import default_ui_base, web_ui_url
from overnight.core.constants import (
    SA_LAST_PROGRESS,
    SA_RESTARTS,
    SA_SANDBOX,
    SA_STATE,
    TASK_QUEUE,
    WORKFLOW_TYPE,
)
from overnight.core.errors import (
    AnswerRefused,
    OvernightError,
    PushRefused,
    RunAlreadyExists,
    RunNotFound,
    RunNotRunning,
    SpecError,
)
from overnight.core.models import Budget, BudgetExtension, RunResult, RunSpec, RunStatus
from overnight.core.specs import load_spec, parse_spec, redact_url, run_summary
from overnight.worker.reap_entries import ReapedSandbox as ReapedSandbox
from overnight.worker.reaping import reap as reap

__all__ = [
    "AnswerRefused",
    "PushRefused",
    "OvernightError",
    "ReapedSandbox",
    "RunAlreadyExists",
    "RunNotFound",
    "RunNotRunning",
    "RunSummary",
    "SpecError",
    "answer_question",
    "cancel_run",
    "default_ui_base",
    "extend_budget",
    "extend_budget_and_wait",
    "get_status",
    "list_runs",
    "load_spec",
    "parse_spec",
    "reap",
    "redact_url",
    "run_summary",
    "start_run",
    "wait_result",
    "web_ui_url",
    "workflow_id_of",
]

# The update shares the signal's name (design.md, section 4).
BUDGET_UPDATE = "extend_budget"
# The answer to the agent's question (the kit's `ask()`).
ANSWER_UPDATE = "answer"
PUSH_AGAIN_UPDATE = "push_again"
# A status query must not hang a CLI when no worker is polling the task queue.
QUERY_TIMEOUT = timedelta(seconds=15)

_STATE = SearchAttributeKey.for_keyword(SA_STATE)
_RESTARTS = SearchAttributeKey.for_int(SA_RESTARTS)
_SANDBOX = SearchAttributeKey.for_keyword(SA_SANDBOX)
_LAST_PROGRESS = SearchAttributeKey.for_datetime(SA_LAST_PROGRESS)


class RunSummary(BaseModel):
    """One line of `overnight list`: Temporal's view plus the run's search attributes."""

    run_id: str
    workflow_status: str
    state: str | None = None
    restarts: int | None = None
    sandbox_id: str | None = None
    last_progress_at: datetime | None = None
    started_at: datetime
    closed_at: datetime | None = None
    # What an open run's activities wait on after a failure (overnight.cli.retrying; filled by
    # `overnight list`, empty from `list_runs`).
    waiting_on: list[str] = Field(default_factory=list)


# --- one run ----------------------------------------------------------------------------------


async def start_run(
    client: Client, spec: RunSpec, *, task_queue: str = TASK_QUEUE
) -> WorkflowHandle[Any, RunResult]:
    """Start a run. A run id names one run: a second start with it is refused, open or closed.
    A spec without one gets a new one (`run-<UTC time>-<4 hex>`). A spec past Temporal's
    payload limits is refused (`SpecError` naming its largest field) before anything is sent."""
    if (problem := too_large(spec)) is not None:
        raise SpecError(problem)
    if not spec.run_id:
        spec = RunSpec.model_validate(
            {**spec.model_dump(exclude_unset=True), "run_id": new_run_id()}
        )
    try:
        return await client.start_workflow(
            WORKFLOW_TYPE,
            spec,
            id=spec.run_id,
            task_queue=task_queue,
            result_type=RunResult,
            # Sandboxes are named `{run_id}-{attempt}`, so reusing an id would meet old ones.
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            priority=task_priority(spec),
            static_summary=run_summary(spec),
            static_details=(
                f"provider `{spec.provider}`, budget {spec.budget.max_restarts} restarts / "
                f"{spec.budget.max_hours:g} h, stall after {spec.stall_seconds:g} s"
            ),
        )
    except WorkflowAlreadyStartedError:
        status = await _workflow_status(client, spec.run_id)
        if status == WorkflowExecutionStatus.RUNNING:
            raise RunAlreadyExists(f"run {spec.run_id!r} is already running") from None
        raise RunAlreadyExists(
            f"run id {spec.run_id!r} was used by an earlier run; choose a new run_id"
        ) from None


def task_priority(spec: RunSpec) -> Priority:
    """The run's place on its task queue when workers are busy: Temporal's priority key is the
    spec's priority (1 first ... 5, as ours), its fairness key the owner. The order runs are
    admitted in is the admission workflow's (docs/admission.md); this orders their tasks."""
    return Priority(priority_key=spec.priority, fairness_key=spec.owner or None)


def new_run_id(now: datetime | None = None) -> str:
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return f"run-{stamp}-{secrets.token_hex(2)}"


def run_handle(client: Client, run_id: str) -> WorkflowHandle[Any, RunResult]:
    return client.get_workflow_handle(run_id, result_type=RunResult)


async def wait_result(client: Client, run_id: str) -> RunResult:
    result: RunResult = await run_handle(client, run_id).result()
    return result


async def get_status(client: Client, run_id: str) -> RunStatus:
    try:
        status: RunStatus = await run_handle(client, run_id).query(
            "status", result_type=RunStatus, rpc_timeout=QUERY_TIMEOUT
        )
    except RPCError as err:
        raise await _explain(client, run_id, err) from None
    return status


async def cancel_run(client: Client, run_id: str, reason: str | None = None) -> None:
    await _signal(client, run_id, "cancel", reason)


async def extend_budget(client: Client, run_id: str, extension: BudgetExtension) -> None:
    """Send the `extend_budget` signal (fire and forget; the workflow ignores a bad one)."""
    await _signal(client, run_id, "extend_budget", extension)


async def extend_budget_and_wait(client: Client, run_id: str, extension: BudgetExtension) -> Budget:
    """The same as an update: waits for the workflow, answers with the new budget, and is
    refused (not ignored) when the extension is bad."""
    try:
        budget: Budget = await run_handle(client, run_id).execute_update(
            BUDGET_UPDATE, extension, result_type=Budget
        )
    except RPCError as err:
        raise await _explain(client, run_id, err) from None
    return budget


async def push_again(client: Client, run_id: str) -> str:
    """Try again now what the run waits on to deliver its work (the `push_again` update: its
    push, a kept workspace's, its pull request, a look at its CI); `PushRefused` says why
    not when it waits on none of them."""
    try:
        said: str = await run_handle(client, run_id).execute_update(
            PUSH_AGAIN_UPDATE, result_type=str
        )
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        why = getattr(cause, "message", None) or str(cause or err)
        raise PushRefused(f"run {run_id}: {why}") from None
    except RPCError as err:
        raise await _explain(client, run_id, err) from None
    return said


async def answer_question(client: Client, run_id: str, text: str) -> str:
    """Answer the agent's waiting question (the `answer` update); `AnswerRefused` says why
    not when no question waits or the text is not one of its choices."""
    try:
        said: str = await run_handle(client, run_id).execute_update(
            ANSWER_UPDATE, text, result_type=str
        )
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        why = getattr(cause, "message", None) or str(cause or err)
        raise AnswerRefused(f"run {run_id} took no answer: {why}") from None
    except RPCError as err:
        raise await _explain(client, run_id, err) from None
    return said


async def _signal(client: Client, run_id: str, name: str, arg: Any) -> None:
    try:
        await run_handle(client, run_id).signal(name, arg)
    except RPCError as err:
        raise await _explain(client, run_id, err, a_worker_answers=False) from None


async def _task_queue(client: Client, run_id: str) -> str | None:
    """The task queue whose workers answer for the run; None when it cannot be told."""
    try:
        return (await client.get_workflow_handle(run_id).describe()).task_queue
    except RPCError:
        return None


async def _workflow_status(client: Client, run_id: str) -> WorkflowExecutionStatus | None:
    """The latest execution's status; None when there is no such workflow."""
    try:
        return (await client.get_workflow_handle(run_id).describe()).status
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def _explain(
    client: Client, run_id: str, err: RPCError, *, a_worker_answers: bool = True
) -> Exception:
    """The run's own words for a refusal: not found, ended, or (a query or an update, which a
    worker answers, unlike a signal the server takes) no worker answered."""
    if a_worker_answers and _no_worker_answered(err):
        said = (str(err).strip().splitlines() or ["no answer"])[0].rstrip(".")
        queue = await _task_queue(client, run_id)
        if queue in (None, TASK_QUEUE):
            fix = "start one (`overnight dev`) and ask again"
        else:  # a demo's own queue, or one a worker was started for
            fix = f"start one on its task queue ({queue}: `python worker.py --task-queue {queue}`)"
        return OvernightError(
            f"no worker answered for run {run_id} ({said}): a worker answers for every run, "
            f"an ended one too: {fix}"
        )
    if err.status != RPCStatusCode.NOT_FOUND:
        return err
    status = await _workflow_status(client, run_id)
    if status is None:
        return RunNotFound(run_id)
    return RunNotRunning(f"run {run_id!r} is no longer running ({_status_name(status)})")


def _no_worker_answered(err: RPCError) -> bool:
    """A query or update no worker took: the server says none polls the run's queue, or the
    call timed out waiting for one (`Timeout expired`, as the server words it)."""
    said = str(err)
    return (
        "no poller seen" in said
        or "Timeout expired" in said
        or err.status == RPCStatusCode.DEADLINE_EXCEEDED
    )


def _status_name(status: WorkflowExecutionStatus | None) -> str:
    return status.name.lower() if status is not None else "unknown"


# --- many runs --------------------------------------------------------------------------------


def summarize(execution: WorkflowExecution) -> RunSummary:
    attributes = execution.typed_search_attributes
    return RunSummary(
        run_id=execution.id,
        workflow_status=_status_name(execution.status),
        state=attributes.get(_STATE),
        restarts=attributes.get(_RESTARTS),
        sandbox_id=attributes.get(_SANDBOX),
        last_progress_at=attributes.get(_LAST_PROGRESS),
        started_at=execution.start_time,
        closed_at=execution.close_time,
    )


async def list_runs(
    client: Client, *, open_only: bool = False, limit: int | None = 100
) -> list[RunSummary]:
    query = f"WorkflowType = '{WORKFLOW_TYPE}'"
    if open_only:
        query += " AND ExecutionStatus = 'Running'"
    return [summarize(execution) async for execution in client.list_workflows(query, limit=limit)]
