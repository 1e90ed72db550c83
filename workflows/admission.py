"""OvernightAdmission: one long-lived workflow per worker pool (task queue) that holds the
pool's places, a semaphore kept by Temporal rather than by any worker.

Runs ask for a place with the `request` signal (by signal-with-start, so the first asker
starts it) and give it back with `release`; the workflow answers each run let in with the
`admitted` signal, in the order `admission_queue` decides. Nothing lives in a worker: a worker
killed mid-step leaves the places in this history, and the next worker goes on from there.
A holder whose workflow closed without giving its place back (terminated, timed out) is found
by looking, every `check_seconds` while runs wait and none fits, and its place taken back; a
waiting run that closed is dropped when it is told it is in and the signal finds no one.
Continue-as-new carries the places whole, so the history stays short.

Its histories replay in tests/admission/test_admission_replay.py: a change to what it does
goes behind `workflow.patched`, as AgentRun's do.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from overnight.admission import (
        ADMISSION_WORKFLOW,
        ADMITTED_SIGNAL,
        PLACES_QUERY,
        RELEASE_SIGNAL,
        REQUEST_SIGNAL,
        AdmissionRequest,
    )
    from workflows import admission_calls
    from workflows.admission_queue import Places, ask, give_back, is_full, let_in, take_back

# Continue as new past this many history events (or when the server suggests it).
CONTINUE_AFTER_EVENTS = 4000


class AdmissionInput(BaseModel):
    """What a new run of the admission workflow starts from (all left out: an empty pool)."""

    model_config = ConfigDict(extra="forbid")

    places: Places | None = None
    # Holders that asked again meanwhile: told again first thing.
    tell_again: list[str] = Field(default_factory=list)
    continue_after_events: int = CONTINUE_AFTER_EVENTS


@workflow.defn(name=ADMISSION_WORKFLOW)
class OvernightAdmission:
    @workflow.init
    def __init__(self, carried: Any = None) -> None:
        # Set up from the input here, before any signal of the first task is handled.
        try:
            self._input = AdmissionInput.model_validate(carried or {})
        except ValidationError as err:
            workflow.logger.warning("admission starts empty: its input was unusable: %s", err)
            self._input = AdmissionInput()
        self._places = self._input.places or Places()
        self._tell_again: set[str] = set(self._input.tell_again)
        self._telling: set[asyncio.Task[None]] = set()
        self._changed = True

    @workflow.signal(name=REQUEST_SIGNAL)
    def request(self, request: Any = None, *_extra: Any) -> None:
        try:
            parsed = AdmissionRequest.model_validate(request)
        except ValidationError as err:
            workflow.logger.warning("ignoring a bad admission request: %s", err)
            return
        if ask(self._places, parsed):
            self._tell_again.add(parsed.holder)
        self._changed = True

    @workflow.signal(name=RELEASE_SIGNAL)
    def release(self, holder: Any = None, *_extra: Any) -> None:
        if isinstance(holder, str) and give_back(self._places, holder):
            self._changed = True

    @workflow.query(name=PLACES_QUERY)
    def places(self) -> Places:
        return self._places

    @workflow.run
    async def run(self, carried: Any = None) -> None:
        looking = asyncio.create_task(self._look_for_closed_holders())
        while True:
            self._changed = False
            again, self._tell_again = self._tell_again, set()
            self._tell(sorted(again) + let_in(self._places))
            if self._history_is_long():
                looking.cancel()
                # Every run let in has been told (or found gone) before the places move on.
                await workflow.wait_condition(
                    lambda: not self._telling and workflow.all_handlers_finished()
                )
                workflow.continue_as_new(
                    AdmissionInput(
                        places=self._places,
                        tell_again=sorted(self._tell_again),
                        continue_after_events=self._input.continue_after_events,
                    )
                )
            await workflow.wait_condition(lambda: self._changed)

    def _tell(self, holders: list[str]) -> None:
        """Tell each run it is in, without waiting for the signals to land: a slow one must
        not hold up the next places. A run that is no longer there gives its place back."""
        for holder in holders:
            self._telling.add(asyncio.create_task(self._tell_one(holder)))

    async def _tell_one(self, holder: str) -> None:
        try:
            await workflow.get_external_workflow_handle(holder).signal(ADMITTED_SIGNAL)
        except FailureError as err:
            workflow.logger.info("run %s was let in but is gone: %s", holder, err)
            if give_back(self._places, holder):
                self._changed = True
        finally:
            task = asyncio.current_task()
            if task is not None:
                self._telling.discard(task)

    async def _look_for_closed_holders(self) -> None:
        """While runs wait and none fits, look every `check_seconds` for holders that closed
        without giving their places back, and take their places back (one timer a period,
        none while the pool has room)."""
        places = self._places
        while True:
            await workflow.wait_condition(lambda: is_full(places))
            await workflow.sleep(
                timedelta(seconds=places.check_seconds), summary="look for holders that closed"
            )
            if not is_full(places):
                continue
            closed = await admission_calls.closed_workflows(sorted(places.holding))
            if take_back(places, closed):
                workflow.logger.warning("took back the places of closed runs: %s", closed)
                self._changed = True

    def _history_is_long(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > self._input.continue_after_events
        )
