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

Anyone who can signal it may send `request` and `release` with any payload, so (workflows
begun with `TRUST_PATCH`) it believes neither: its limits and its bounds on owner and priority
are its own worker's settings (the `pool_settings` local activity, read at its start and again
every `SETTINGS_REFRESH`), a request's owner and priority are held to those bounds, and each
holder named is asked first (`released_holders`, one activity for every batch): a request is
noted unless its holder is out of the pool (closed, no overnight run, or saying so itself
through its `in_pool` query), and a `release` frees a place only when it is. A holder that
does not answer (its worker gone or slow; `ASK_AGAIN_PATCH`) is asked again every
`check_seconds` until it answers or closes. Workflows begun before took the latest request's
limits and believed every request and release.

Its histories replay in tests/admission/test_admission_replay.py: a change to what it does
goes behind `workflow.patched`, as AgentRun's do.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from overnight.core.admission import (
        ADMISSION_WORKFLOW,
        ADMITTED_SIGNAL,
        PLACES_QUERY,
        RELEASE_SIGNAL,
        REQUEST_SIGNAL,
        AdmissionRequest,
    )
    from workflows.calls import admission
    from workflows.patches import ASK_AGAIN_PATCH, TRUST_PATCH
    from workflows.pure.admission_queue import (
        Places,
        ask,
        give_back,
        in_places,
        is_full,
        let_in,
        set_limits,
        take_back,
    )

# Continue as new past this many history events (or when the server suggests it).
CONTINUE_AFTER_EVENTS = 4000
# How often the worker's settings are read again (a changed setting takes effect after its
# workers restart and at most this long after, when runs come and go).
SETTINGS_REFRESH = timedelta(minutes=5)


class AdmissionInput(BaseModel):
    """What a new run of the admission workflow starts from (all left out: an empty pool)."""

    model_config = ConfigDict(extra="forbid")

    places: Places | None = None
    # Holders that asked again meanwhile: told again first thing.
    tell_again: list[str] = Field(default_factory=list)
    continue_after_events: int = CONTINUE_AFTER_EVENTS
    # Requests not yet noted and releases not yet checked, carried over (`TRUST_PATCH`).
    pending: list[AdmissionRequest] = Field(default_factory=list)
    claims: list[str] = Field(default_factory=list)


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
        self._trust: bool | None = None
        # Requests to check before they are noted, and releases to check before they free a
        # place, each with the number of its latest claim (a request or a newer release
        # changes it).
        self._pending: list[AdmissionRequest] = list(self._input.pending)
        self._claims: dict[str, int] = dict.fromkeys(self._input.claims, 0)
        self._claim_seq = 0
        self._settings_at: datetime | None = None

    def _trusting(self) -> bool:
        """Whether this workflow believes no signal (`TRUST_PATCH`); asked once, first."""
        if self._trust is None:
            self._trust = workflow.patched(TRUST_PATCH)
        return self._trust

    @workflow.signal(name=REQUEST_SIGNAL)
    def request(self, request: Any = None, *_extra: Any) -> None:
        try:
            parsed = AdmissionRequest.model_validate(request)
        except ValidationError as err:
            workflow.logger.warning("ignoring a bad admission request: %s", err)
            return
        if self._trusting():
            # Noted once its holder is found asking (`_check_holders`); a release claimed
            # before is moot.
            self._claims.pop(parsed.holder, None)
            self._pending.append(parsed)
        elif ask(self._places, parsed):
            self._tell_again.add(parsed.holder)
        self._changed = True

    @workflow.signal(name=RELEASE_SIGNAL)
    def release(self, holder: Any = None, *_extra: Any) -> None:
        if not isinstance(holder, str):
            return
        if self._trusting():
            # Anyone may send it: the holder is asked first (`_check_holders`).
            asking = any(request.holder == holder for request in self._pending)
            if asking or in_places(self._places, holder):
                self._claim_seq += 1
                self._claims[holder] = self._claim_seq
        elif give_back(self._places, holder):
            self._changed = True

    @workflow.query(name=PLACES_QUERY)
    def places(self) -> Places:
        return self._places

    @workflow.run
    async def run(self, carried: Any = None) -> None:
        trusting = self._trusting()
        if trusting:
            # No place is given before the pool's limits are known.
            while not await self._read_settings():
                await workflow.sleep(timedelta(seconds=self._places.check_seconds))
        looking = asyncio.create_task(self._look_for_closed_holders())
        checking = asyncio.create_task(self._check_holders()) if trusting else None
        while True:
            self._changed = False
            if trusting:
                await self._refresh_settings()
            again, self._tell_again = self._tell_again, set()
            self._tell(sorted(again) + let_in(self._places))
            if self._history_is_long():
                looking.cancel()
                if checking is not None:
                    checking.cancel()
                # Every run let in has been told (or found gone) before the places move on.
                await workflow.wait_condition(
                    lambda: not self._telling and workflow.all_handlers_finished()
                )
                workflow.continue_as_new(
                    AdmissionInput(
                        places=self._places,
                        tell_again=sorted(self._tell_again),
                        continue_after_events=self._input.continue_after_events,
                        pending=self._pending,
                        claims=sorted(self._claims),
                    )
                )
            await workflow.wait_condition(lambda: self._changed)

    async def _read_settings(self) -> bool:
        """The limits and bounds of the worker running this workflow; False (and the limits
        kept as they were) when it cannot say: a worker without the activity, mid-deploy."""
        self._settings_at = workflow.now()
        try:
            settings = await admission.pool_settings()
        except (ActivityError, ApplicationError) as err:
            workflow.logger.warning("admission keeps its limits: no worker settings: %s", err)
            return False
        set_limits(self._places, settings)
        return True

    async def _refresh_settings(self) -> None:
        at = self._settings_at
        if at is None or workflow.now() - at >= SETTINGS_REFRESH:
            await self._read_settings()

    async def _check_holders(self) -> None:
        """Ask the holders named by requests and releases whether they are out of the pool:
        a request is noted unless its holder is (or says so), a release frees a place only
        when it is. A holder that does not answer is noted (its request), or keeps its
        place and is asked again (its release)."""
        while True:
            await workflow.wait_condition(lambda: bool(self._claims or self._pending))
            claimed, asked = dict(self._claims), list(self._pending)
            ids = sorted(set(claimed) | {request.holder for request in asked})
            try:
                found = await admission.released_holders(ids, ask=True)
            except ActivityError as err:
                workflow.logger.warning("could not ask the holders: %s", err)
                await workflow.sleep(timedelta(seconds=self._places.check_seconds))
                continue
            out = set(found.ids)
            self._pending = self._pending[len(asked) :]
            for request in asked:
                if request.holder in out:
                    workflow.logger.warning(
                        "ignoring a request for %s: out of the pool", request.holder
                    )
                elif ask(self._places, request, take_limits=False):
                    self._tell_again.add(request.holder)
            ask_again = False
            for holder, seq in claimed.items():
                if self._claims.get(holder) != seq:
                    continue  # asked again, or released again, meanwhile: checked next round
                if holder in found.unanswered and workflow.patched(ASK_AGAIN_PATCH):
                    ask_again = True  # its release stands until it answers or closes
                    continue
                del self._claims[holder]
                if holder in out:
                    give_back(self._places, holder)
            self._changed = True
            if ask_again:
                await workflow.sleep(
                    timedelta(seconds=self._places.check_seconds),
                    summary="ask again the holders that did not answer",
                )

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
            holders = sorted(places.holding)
            if self._trusting():
                # A holder whose release is being checked gave its place back: not taken.
                holders = [h for h in holders if h not in self._claims]
                found = await admission.released_holders(holders, ask=False)
                closed = [h for h in found.ids if h not in self._claims]
            else:
                closed = await admission.closed_workflows(holders)
            if take_back(places, closed):
                workflow.logger.warning("took back the places of closed runs: %s", closed)
                self._changed = True

    def _history_is_long(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > self._input.continue_after_events
        )
