"""Many runs for the console benchmark, cheaply: what the console reads of a run, and nothing
it does not.

The console reads a run's visibility entry (search attributes and row memo) and, naively,
its `status` query. A seeded run is an `AgentRun` workflow started with the memo and the
search attributes a real run publishes (overnight/core/run_row.py, workflows/visibility.py), on a
task queue served by `StandInRun` (registered under the name `AgentRun`): it holds still and
answers `status` from its input, so the naive view's queries are answered as a real worker
answers them, without a sandbox or an agent. A thousand start in seconds.
"""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from overnight.core.constants import ROW_MEMO_KEY
from overnight.core.run_row import RowMemo
from workflows.visibility import (
    AGENT_KEY,
    LABELS_KEY,
    LAST_PROGRESS_KEY,
    OWNER_KEY,
    RESTARTS_KEY,
    STATE_KEY,
)

OWNERS = ("web", "data", "infra", "mobile", "docs")
AGENTS = ("claude-code", "codex", "own")
# A night's mix: most running, some needing a person.
STATES = ("running",) * 14 + ("needs_attention",) * 3 + ("waiting_for_answer",) * 2 + ("queued",)
START_CONCURRENCY = 32


@workflow.defn(name="AgentRun", sandboxed=False)
class StandInRun:
    """Holds still and answers `status` with what it was started with."""

    def __init__(self) -> None:
        self._status: dict[str, Any] = {}

    @workflow.run
    async def run(self, status: dict[str, Any]) -> None:
        self._status = status
        await workflow.wait_condition(lambda: False)

    @workflow.query(name="status")
    def status(self) -> dict[str, Any]:
        return self._status


def seeded_row(n: int, rng: random.Random, now: datetime) -> tuple[RowMemo, str, list[str]]:
    """The nth run's row, owner and labels."""
    state = rng.choice(STATES)
    spend = round(rng.uniform(0.05, 4.0), 4)
    row = RowMemo(
        state=state,
        attempt=rng.randint(1, 3),
        restarts=rng.randint(0, 2),
        max_restarts=5,
        next_step=f"step {n}: refactor the parser module and run the tests again",
        spend_usd=spend,
        max_spend_usd=5.0,
        model_usd=round(spend * 0.7, 4),
        hours_used=round(rng.uniform(0.1, 8), 3),
        max_hours=24,
        wait_hours=round(rng.uniform(0, 1), 3),
        last_progress_at=now - timedelta(minutes=rng.randint(0, 90)),
        attention="restart budget used up (5 of 5)" if state == "needs_attention" else None,
        question="Merge the schema change now?" if state == "waiting_for_answer" else None,
        choices=["merge", "wait"] if state == "waiting_for_answer" else [],
        safety_net_usd=round(spend * 0.05, 4),
        restarts_by_cause={"stalled": 1} if n % 4 == 0 else {},
    )
    return row, OWNERS[n % len(OWNERS)], ["nightly", f"batch-{n % 7}"]


async def seed_runs(
    client: Client, queue: str, prefix: str, first: int, count: int, seed: int = 7
) -> list[str]:
    """Start runs `first` .. `first + count - 1`; their ids."""
    rng = random.Random(seed + first)
    now = datetime.now(UTC)
    gate = asyncio.Semaphore(START_CONCURRENCY)
    ids = [f"{prefix}-{n:05d}" for n in range(first, first + count)]

    async def start(n: int, run_id: str) -> None:
        row, owner, labels = seeded_row(n, rng, now)
        attributes = TypedSearchAttributes(
            [
                SearchAttributePair(STATE_KEY, row.state),
                SearchAttributePair(RESTARTS_KEY, row.restarts),
                SearchAttributePair(LAST_PROGRESS_KEY, row.last_progress_at or now),
                SearchAttributePair(OWNER_KEY, owner),
                SearchAttributePair(AGENT_KEY, AGENTS[n % len(AGENTS)]),
                SearchAttributePair(LABELS_KEY, labels),
            ]
        )
        status = _status(run_id, row, now)
        async with gate:
            await client.start_workflow(
                "AgentRun",
                status,
                id=run_id,
                task_queue=queue,
                memo={ROW_MEMO_KEY: row.model_dump(mode="json")},
                search_attributes=attributes,
            )

    await asyncio.gather(*(start(first + i, run_id) for i, run_id in enumerate(ids)))
    return ids


def _status(run_id: str, row: RowMemo, now: datetime) -> dict[str, Any]:
    """What the stand-in answers `status` with: a RunStatus as JSON, of a realistic size."""
    return {
        "run_id": run_id,
        "state": row.state,
        "attempt": row.attempt,
        "restarts_used": row.restarts,
        "budget": {"max_restarts": 5, "max_hours": 24, "max_spend_usd": 5.0},
        "hours_used": row.hours_used,
        "spend_usd": row.spend_usd,
        "started_at": now.isoformat(),
        "last_progress_at": row.last_progress_at.isoformat() if row.last_progress_at else None,
        "checkpoint_summary": {"next": row.next_step, "last_note": "ran the tests: 2 failures"},
        "attention_reason": row.attention,
        "talk": {"question": row.question, "choices": row.choices},
    }
