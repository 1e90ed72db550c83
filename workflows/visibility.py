"""Puts a run's state where the Web UI shows it: the Markdown card and the search attributes.

Search attributes are upserted only when they change (each upsert is a history event and a
write to the server's visibility store) and only those the namespace has registered, so a
server without them never breaks a run. Runs begun with `LEAN_WRITES_PATCH` upsert
`OvernightLastProgress` only along with a change of state, restarts or sandbox, or when the
value upserted last is `LAST_PROGRESS_EVERY` old: a run checkpointing every minute costs 6
upserts an hour, not 60 (the `status` query and the card always have the exact time).

Runs begun with `ROW_PATCH` publish what the console lists them by: their owner, agent kind
and labels as search attributes, once, in their first upsert (no event of their own), and
their row (overnight/core/run_row.py) in the memo, written by workflows/pure/row.py's lean rule.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributeUpdate

with workflow.unsafe.imports_passed_through():
    from overnight.core.constants import (
        ROW_MEMO_KEY,
        SA_AGENT,
        SA_LABELS,
        SA_LAST_PROGRESS,
        SA_OWNER,
        SA_RESTARTS,
        SA_SANDBOX,
        SA_STATE,
    )
    from overnight.core.models import RunSpec, RunStatus
    from overnight.core.run_row import RowMemo
    from workflows.metrics import RunMetrics
    from workflows.patches import LEAN_WRITES_PATCH, ROW_PATCH
    from workflows.pure.row import row_due, row_of

# The typed keys, here only: the console reads the columns back with them
# (overnight/console/rows.py).
STATE_KEY = SearchAttributeKey.for_keyword(SA_STATE)
RESTARTS_KEY = SearchAttributeKey.for_int(SA_RESTARTS)
SANDBOX_KEY = SearchAttributeKey.for_keyword(SA_SANDBOX)
LAST_PROGRESS_KEY = SearchAttributeKey.for_datetime(SA_LAST_PROGRESS)
OWNER_KEY = SearchAttributeKey.for_keyword(SA_OWNER)
AGENT_KEY = SearchAttributeKey.for_keyword(SA_AGENT)
LABELS_KEY = SearchAttributeKey.for_keyword_list(SA_LABELS)

LAST_PROGRESS_EVERY = timedelta(minutes=10)


class Publisher:
    def __init__(self) -> None:
        self._card: str | None = None
        self._values: dict[str, object] = {}
        self._lean: bool | None = None
        self._rows: bool | None = None
        self._row: RowMemo | None = None
        self._row_at: datetime | None = None
        self._metrics = RunMetrics()

    def publish(
        self, status: RunStatus, card: str, present: list[str], spec: RunSpec | None = None
    ) -> None:
        self._metrics.record(status)  # no command: metrics are no part of the history
        if card != self._card:
            workflow.set_current_details(card)
            self._card = card
        wanted: dict[str, object] = {
            SA_STATE: status.state,
            SA_RESTARTS: status.restarts_used,
            SA_SANDBOX: status.sandbox_id or "",
            SA_LAST_PROGRESS: status.last_progress_at,
        }
        if self._lean is None:
            # Asked at the first publish, the same point on every replay.
            self._lean = workflow.patched(LEAN_WRITES_PATCH)
        if self._rows is None:
            self._rows = spec is not None and workflow.patched(ROW_PATCH)
        updates: list[SearchAttributeUpdate[Any]] = []
        for name, value in wanted.items():
            if name not in present or self._values.get(name) == value or value is None:
                continue
            if self._lean and name == SA_LAST_PROGRESS and not updates:
                if not self._progress_due(value):
                    continue
            updates.append(_update(name, value))
            self._values[name] = value
        if updates and self._rows and spec is not None and SA_OWNER not in self._values:
            updates += _spec_updates(spec, present)
            self._values[SA_OWNER] = spec.owner
        if updates:
            workflow.upsert_search_attributes(updates)
        if self._rows:
            self._publish_row(status)

    def _publish_row(self, status: RunStatus) -> None:
        now = workflow.now()
        row = row_of(status, now)
        if row_due(self._row, row, self._row_at, now):
            workflow.upsert_memo({ROW_MEMO_KEY: row.model_dump(mode="json")})
            self._row, self._row_at = row, now

    def _progress_due(self, value: object) -> bool:
        """Alone, a newer last progress is upserted only once the one shown is this old."""
        shown = self._values.get(SA_LAST_PROGRESS)
        if not isinstance(shown, datetime) or not isinstance(value, datetime):
            return True
        return value - shown >= LAST_PROGRESS_EVERY


def _update(name: str, value: object) -> SearchAttributeUpdate[Any]:
    if name == SA_RESTARTS and isinstance(value, int):
        return RESTARTS_KEY.value_set(value)
    if name == SA_LAST_PROGRESS and isinstance(value, datetime):
        return LAST_PROGRESS_KEY.value_set(value)
    key = STATE_KEY if name == SA_STATE else SANDBOX_KEY
    return key.value_set(str(value))


def _spec_updates(spec: RunSpec, present: list[str]) -> list[SearchAttributeUpdate[Any]]:
    """What never changes in a run: its owner, its agent's kind, its labels (those set)."""
    kind = spec.agent.kind if spec.agent is not None else "own"
    wanted: list[tuple[str, SearchAttributeUpdate[Any]]] = [(SA_AGENT, AGENT_KEY.value_set(kind))]
    if spec.owner:
        wanted.append((SA_OWNER, OWNER_KEY.value_set(spec.owner)))
    if spec.labels:
        wanted.append((SA_LABELS, LABELS_KEY.value_set(list(spec.labels))))
    return [update for name, update in wanted if name in present]
