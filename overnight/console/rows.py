"""One line of the console's runs list (`RunRow`), made from one visibility entry: the search
attributes (state, restarts, owner, labels, agent kind) and the run's row memo
(overnight/core/run_row.py), decoded through the client's data converter so that encrypted memos
(`OVERNIGHT_CODEC_KEYS`) are read in the console's process. No query to the run.

A run begun before the row memo shows what its search attributes say, and `has_row` is
False (the run's own page asks its `status`). The pull request link is kept only when it is
an https URL, so nothing an agent wrote can become a link of another kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from temporalio.client import WorkflowExecution, WorkflowExecutionStatus

from overnight.core.constants import ROW_MEMO_KEY
from overnight.core.run_row import RowMemo, row_from_memo
from workflows.visibility import (
    AGENT_KEY,
    LABELS_KEY,
    LAST_PROGRESS_KEY,
    OWNER_KEY,
    RESTARTS_KEY,
    SANDBOX_KEY,
    STATE_KEY,
)

# How a closed workflow reads as a run's state where the run's own last word is not enough:
# a run fails (OutOfBudget, a bad spec) or is terminated without publishing it.
_CLOSED_STATES = {
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.TERMINATED: "terminated",
    WorkflowExecutionStatus.TIMED_OUT: "timed_out",
    WorkflowExecutionStatus.CANCELED: "cancelled",
}


@dataclass(frozen=True)
class RunRow:
    """What the runs list and the night show of a run (None: not known for this run)."""

    run_id: str
    state: str
    closed: bool
    started_at: datetime
    closed_at: datetime | None = None
    workflow_status: str = "running"
    owner: str = ""
    labels: list[str] = field(default_factory=list)
    agent: str = ""
    sandbox_id: str | None = None
    attempt: int = 0
    restarts: int = 0
    max_restarts: int | None = None
    next_step: str | None = None
    spend_usd: float = 0
    max_spend_usd: float | None = None
    model_usd: float = 0
    hours_used: float = 0
    max_hours: float | None = None
    wait_hours: float = 0
    attention_hours: float = 0
    last_progress_at: datetime | None = None
    pull_request_url: str | None = None
    attention: str | None = None
    question: str | None = None
    choices: list[str] = field(default_factory=list)
    safety_net_usd: float | None = None
    restarts_by_cause: dict[str, int] = field(default_factory=dict)
    failure: str | None = None
    # What the run said its state was last (a failed run's last word: needs_attention when it
    # ran out of budget with nobody answering).
    last_state: str = ""
    # False: a run begun before the row memo (its figures are not in the list).
    has_row: bool = False

    @property
    def spend_share(self) -> float | None:
        """Spend against its budget (None: no spend budget)."""
        if not self.max_spend_usd:
            return None
        return self.spend_usd / self.max_spend_usd

    @property
    def hours_share(self) -> float | None:
        if not self.max_hours:
            return None
        return self.hours_used / self.max_hours


async def row_of(execution: WorkflowExecution) -> RunRow:
    """The row of one visibility entry (its memo decoded with the client's converter)."""
    try:
        memo = await execution.memo_value(ROW_MEMO_KEY, None)
    except Exception:  # a memo this console cannot decode (a key it lacks): the rest shows
        memo = None
    return row_from(execution, row_from_memo(memo))


def row_from(execution: WorkflowExecution, memo: RowMemo | None) -> RunRow:
    """The row of one visibility entry and its decoded memo (None: none)."""
    found = execution.typed_search_attributes
    status = execution.status
    state = _state(status, memo.state if memo else None, found.get(STATE_KEY))
    base = RunRow(
        run_id=execution.id,
        state=state,
        closed=status is not None and status != WorkflowExecutionStatus.RUNNING,
        started_at=execution.start_time,
        closed_at=execution.close_time,
        workflow_status=status.name.lower() if status is not None else "unknown",
        owner=found.get(OWNER_KEY) or "",
        labels=list(found.get(LABELS_KEY) or []),
        agent=found.get(AGENT_KEY) or "",
        sandbox_id=found.get(SANDBOX_KEY) or None,
        restarts=found.get(RESTARTS_KEY) or 0,
        last_progress_at=found.get(LAST_PROGRESS_KEY),
        last_state=(memo.state if memo else None) or found.get(STATE_KEY) or "",
    )
    if memo is None:
        return base
    waiting = state == "waiting_for_answer"
    return replace(
        base,
        attempt=memo.attempt,
        restarts=memo.restarts,
        max_restarts=memo.max_restarts,
        next_step=memo.next_step,
        spend_usd=memo.spend_usd,
        max_spend_usd=memo.max_spend_usd,
        model_usd=memo.model_usd,
        hours_used=memo.hours_used,
        max_hours=memo.max_hours,
        wait_hours=memo.wait_hours,
        attention_hours=memo.attention_hours,
        # The search attribute may lag the memo (its own lean rule), or the other way round.
        last_progress_at=_later(base.last_progress_at, memo.last_progress_at),
        pull_request_url=_https(memo.pull_request_url),
        attention=memo.attention if state == "needs_attention" else None,
        question=memo.question if waiting else None,
        choices=list(memo.choices) if waiting else [],
        safety_net_usd=memo.safety_net_usd,
        restarts_by_cause=dict(memo.restarts_by_cause),
        failure=memo.failure,
        has_row=True,
    )


def _state(status: WorkflowExecutionStatus | None, said: str | None, attribute: str | None) -> str:
    """What the run said last, unless its workflow ended in a way the run could not say."""
    if status is not None and status in _CLOSED_STATES:
        return _CLOSED_STATES[status]
    return (
        said
        or attribute
        or ("running" if status == WorkflowExecutionStatus.RUNNING else "finished")
    )


def _later(one: datetime | None, other: datetime | None) -> datetime | None:
    if one is None or other is None:
        return one or other
    return max(one, other)


def _https(url: str | None) -> str | None:
    return url if url and url.startswith("https://") and " " not in url else None
