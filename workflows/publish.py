"""Puts a run's state where the Web UI shows it: the Markdown card and the search attributes.

Search attributes are upserted only when they change (each upsert is a history event) and only
those the namespace has registered, so a server without them never breaks a run.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributeUpdate

with workflow.unsafe.imports_passed_through():
    from overnight.constants import SA_LAST_PROGRESS, SA_RESTARTS, SA_SANDBOX, SA_STATE
    from overnight.models import RunStatus

STATE_KEY = SearchAttributeKey.for_keyword(SA_STATE)
RESTARTS_KEY = SearchAttributeKey.for_int(SA_RESTARTS)
SANDBOX_KEY = SearchAttributeKey.for_keyword(SA_SANDBOX)
LAST_PROGRESS_KEY = SearchAttributeKey.for_datetime(SA_LAST_PROGRESS)


class Publisher:
    def __init__(self) -> None:
        self._card: str | None = None
        self._values: dict[str, object] = {}

    def publish(self, status: RunStatus, card: str, present: list[str]) -> None:
        if card != self._card:
            workflow.set_current_details(card)
            self._card = card
        wanted: dict[str, object] = {
            SA_STATE: status.state,
            SA_RESTARTS: status.restarts_used,
            SA_SANDBOX: status.sandbox_id or "",
            SA_LAST_PROGRESS: status.last_progress_at,
        }
        updates: list[SearchAttributeUpdate[Any]] = []
        for name, value in wanted.items():
            if name not in present or self._values.get(name) == value or value is None:
                continue
            updates.append(_update(name, value))
            self._values[name] = value
        if updates:
            workflow.upsert_search_attributes(updates)


def _update(name: str, value: object) -> SearchAttributeUpdate[Any]:
    if name == SA_RESTARTS and isinstance(value, int):
        return RESTARTS_KEY.value_set(value)
    if name == SA_LAST_PROGRESS and isinstance(value, datetime):
        return LAST_PROGRESS_KEY.value_set(value)
    key = STATE_KEY if name == SA_STATE else SANDBOX_KEY
    return key.value_set(str(value))
