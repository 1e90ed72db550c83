"""A scripted fake sandbox world for AgentRun's workflow tests, with its activities by name.

`FakeWorld` behaves like a provider seen through the sandbox activities: it creates sandboxes
(idempotently, by `{run_id}-{attempt}` name), starts agents, pauses and stops sandboxes, and
answers `observe_agent` from a per-attempt script of steps (`Quiet()`, `progress(text)`,
`exits(code)`, ...). It records everything the workflow asked for, so a test reads like the
failure it proves. The activities are registered under the names in `ActivityName`, exactly
as the real ones are, and a worker runs them: no workflow internals are patched.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import handed_over
from activities.models import (
    ActivityName,
    AgentStarted,
    AnswerAgentInput,
    CheckpointRead,
    CheckpointSalvage,
    CreateSandboxInput,
    ExtendSandboxInput,
    GatewayBooks,
    ListSandboxesInput,
    Observation,
    ObserveInput,
    OutputTail,
    ReadCheckpointInput,
    RunStoreFreed,
    RunStoreRef,
    SandboxInfo,
    SandboxList,
    SandboxRef,
    SandboxState,
    SearchAttributeCheck,
    SearchAttributeCheckInput,
    SetModelCapInput,
    SpecCheck,
    SpecCheckInput,
    StartAgentInput,
)
from activities.notify.models import DeliveryInput, Notification, SendResult
from fakes.delivery import FakeDelivery
from overnight.core.constants import LABEL_ATTEMPT, LABEL_RUN

# ---- script steps: what the agent and its sandbox do between two looks ------------------


@dataclass(frozen=True)
class Quiet:
    """Nothing new: the agent is working and has not written a checkpoint."""


@dataclass(frozen=True)
class Writes:
    """The agent leaves this file at the checkpoint path (a read of it gives `read`)."""

    read: CheckpointRead


@dataclass(frozen=True)
class Exits:
    """The agent process exits with `code`, after writing `final` to its checkpoint if set."""

    code: int
    final: str | None = None


@dataclass(frozen=True)
class SandboxStops:
    """The provider stops the sandbox under the agent (its time limit, a fault)."""

    reason: str | None


@dataclass(frozen=True)
class SandboxPaused:
    """The provider pauses the sandbox under the agent, saying why (a local sandbox past its
    disk limit, or below its host's floor of free space); a wake carries the agent on."""

    reason: str


@dataclass(frozen=True)
class StopsAnswering:
    """From now on every call about this sandbox fails (retryable, like a network black hole)."""


@dataclass(frozen=True)
class Overloaded:
    """This try fails as the provider's API does in a storm (529, retryable); the retry goes
    on with the script's next step."""


@dataclass(frozen=True)
class Hangs:
    """This look never returns on its own: the observe activity heartbeats until cancelled."""


@dataclass(frozen=True)
class WorkerDies:
    """This look's worker is SIGKILLed at once: no heartbeat, no answer, ever (only Temporal's
    timeouts end the attempt; the retry goes on with the script's next step). `meanwhile`: a
    checkpoint the agent writes while nobody watches."""

    meanwhile: CheckpointRead | None = None


@dataclass(frozen=True)
class Books:
    """The host's gateway has booked this much to the run's model calls (given to a look that
    asks for them), refused this many calls at its cap, and seen the last request body
    (`body`, its hash) this many times in a row."""

    usd: float
    cap_refusals: int = 0
    repeats: int = 0
    body: str = ""


@dataclass(frozen=True)
class HandedOver:
    """This look's worker shuts down gracefully: the attempt hands the watch over
    (`WorkerShutdown`, retried at once elsewhere; activities.heartbeat)."""


Step = (
    Quiet
    | Writes
    | Exits
    | SandboxStops
    | SandboxPaused
    | StopsAnswering
    | Overloaded
    | Hangs
    | HandedOver
    | WorkerDies
    | Books
)


def progress(text: str) -> Writes:
    """A good checkpoint write: the observation reports it as changed."""
    return Writes(checkpoint_ok(text))


def exits(code: int, final: str | None = None) -> Exits:
    return Exits(code, final)


def checkpoint_ok(text: str) -> CheckpointRead:
    data = text.encode()
    return CheckpointRead(status="ok", digest=digest_of(data), size=len(data), text=text)


def checkpoint_too_large(size: int) -> CheckpointRead:
    return CheckpointRead(status="too_large", digest=f"too_large:{size}", size=size)


def checkpoint_binary(data: bytes) -> CheckpointRead:
    return CheckpointRead(
        status="unreadable", digest=digest_of(data), size=len(data), detail="(invalid start byte)"
    )


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def note(next_step: str, *notes: str) -> str:
    """A checkpoint in the shape the sample agent writes: JSON with `next` and `notes`."""
    return json.dumps({"next": next_step, "notes": list(notes)})


# ---- what the world remembers ---------------------------------------------------------


@dataclass
class AgentStart:
    """One start of the agent: what it would see in its OVERNIGHT_* variables and files."""

    sandbox_id: str
    attempt: int
    restart_reason: str
    # The checkpoint file the sandbox was created with (None for a start in the same sandbox).
    checkpoint: str | None
    fresh_start: int
    process_id: str
    # What the agent is told in its failure's file (a CI round's check and log; "": none).
    told: str = ""


@dataclass
class FakeSandbox:
    sandbox_id: str
    name: str
    attempt: int
    labels: dict[str, str]
    state: SandboxState = "running"
    stop_reason: str | None = None
    file: CheckpointRead | None = None
    process_id: str = ""
    answering: bool = True
    lease_ends_at: datetime | None = None

    def info(self) -> SandboxInfo:
        return SandboxInfo(
            sandbox_id=self.sandbox_id,
            name=self.name,
            state=self.state,
            stop_reason=self.stop_reason,
            labels=dict(self.labels),
            lease_ends_at=self.lease_ends_at,
        )


class Unreachable(ApplicationError):
    def __init__(self, sandbox_id: str) -> None:
        super().__init__(f"sandbox {sandbox_id} is not answering", type="SandboxUnreachable")


@dataclass
class Hold:
    """Keeps an activity running until released (or cancelled), so a test can act meanwhile.
    `shielded`: a cancel is seen (`cancel_seen`) but the activity goes on until released, as a
    create that cannot stop half-way does; a test that releases it only then never completes
    an activity whose cancel is still on its way (which the time-skipping server cannot take:
    it fails the workflow task with ACTIVITY_UNKNOWN, and the run never ends)."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    cancel_seen: asyncio.Event = field(default_factory=asyncio.Event)
    shielded: bool = False
    cancelled: bool = False

    async def wait(self) -> None:
        self.started.set()
        while not self.release.is_set():
            try:
                activity.heartbeat()
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                self.cancelled = True
                self.cancel_seen.set()
                if not self.shielded:
                    raise


class FakeWorld:
    """Sandboxes, agents and scripted observations for one run under test."""

    def __init__(self) -> None:
        self.sandboxes: dict[str, FakeSandbox] = {}
        # What the workflow did to sandboxes, in order: "create box-2", "pause box-1", ...
        self.log: list[str] = []
        self.starts: list[AgentStart] = []
        self.paused: list[str] = []
        self.stopped: list[str] = []
        # Sandboxes paused at the run's end to be kept for a look, and until when.
        self.kept_until: dict[str, datetime] = {}
        self.observed: list[ObserveInput] = []
        self.cancelled_observes = 0
        self.search_attributes: list[str] | None = []
        self.create_errors: dict[int, ApplicationError] = {}
        self.create_holds: dict[int, Hold] = {}
        # Pauses held (by sandbox id), each for its first pause only.
        self.pause_holds: dict[str, Hold] = {}
        self.stop_error: ApplicationError | None = None
        # The next this many stops land on a worker SIGKILLed as they begin: no answer and no
        # heartbeat, ever (only Temporal's timeouts end the attempt).
        self.stop_workers_die = 0
        self.stop_attempts: list[int] = []
        self.pause_error: ApplicationError | None = None
        self._scripts: dict[int, Iterator[Step]] = {}
        self._hang = Hold()
        # With a lease, sandboxes pause at its end (as Runtime's do), judged by workflow time.
        self.lease: timedelta | None = None
        self.extends: list[tuple[str, datetime]] = []
        self.wakes: list[str] = []
        self.lease_pauses: list[str] = []
        self.create_inputs: list[CreateSandboxInput] = []
        # What each agent process printed (by process id, `agent-<attempt>-<fresh>`): its
        # last words come back when the workflow asks for them.
        self.output: dict[str, str] = {}
        self.tail_requests: list[str] = []
        # Notifications the run sent (first tries), and later tries for one target each.
        self.notifications: list[Notification] = []
        self.deliveries: list[DeliveryInput] = []
        # The next `notify_failures` tries fail like this, or first tries leave these targets.
        self.notify_error: ApplicationError | None = None
        self.notify_failures = 0
        self.notify_undelivered: list[str] = []
        # What the worker's grants refuse of a spec (`check_spec`), and the specs it was asked.
        self.refusals: list[str] = []
        self.spec_checks: list[SpecCheckInput] = []
        # Answers written for the agent kit's requests (`answer_agent`), in order.
        self.answers: list[AnswerAgentInput] = []
        # Runs whose store a worker was asked to free (`free_run_store`), in order.
        self.freed_stores: list[str] = []
        # The Runtime egress secrets (a run's model key) erased with them.
        self.erased_secrets: list[str] = []
        # The gateway's caps set again (`set_model_cap`): sandbox, allowance, wakes before it.
        self.caps: list[tuple[str, float | None, int]] = []
        # The origin a finished run pushes its branch to, and its pull requests.
        self.delivery = FakeDelivery(self)

    # -- setting the scene --

    def script(self, attempt: int, steps: Iterable[Step]) -> FakeWorld:
        """What the agent in sandbox `attempt` does, one step per look; then it stays quiet."""
        self._scripts[attempt] = iter(steps)
        return self

    def hold_create(self, attempt: int, *, shielded: bool = False) -> Hold:
        hold = Hold(shielded=shielded)
        self.create_holds[attempt] = hold
        return hold

    def hold_pause(self, sandbox_id: str) -> Hold:
        hold = Hold(shielded=True)
        self.pause_holds[sandbox_id] = hold
        return hold

    # -- reading the outcome --

    def box(self, attempt: int) -> FakeSandbox:
        return next(box for box in self.sandboxes.values() if box.attempt == attempt)

    def state_of(self, attempt: int) -> SandboxState:
        return self.box(attempt).state

    def running(self) -> list[str]:
        return [box.sandbox_id for box in self.sandboxes.values() if box.state == "running"]

    def creates(self) -> list[AgentStart]:
        return [start for start in self.starts if start.fresh_start == 0]

    def activities(self) -> list[Callable[..., Any]]:
        return [
            self.create_sandbox,
            self.start_agent,
            self.observe_agent,
            self.read_checkpoint,
            self.pause_sandbox,
            self.stop_sandbox,
            self.wake_sandbox,
            self.extend_sandbox,
            self.list_sandboxes,
            self.check_search_attributes,
            self.send_notification,
            self.deliver_notification,
            self.check_spec,
            self.answer_agent,
            self.free_run_store,
            self.set_model_cap,
            *self.delivery.activities(),
        ]

    def notified(self) -> list[str]:
        """The events notified, in order."""
        return [note.event for note in self.notifications]

    def _tail(self, process_id: str | None) -> OutputTail | None:
        if process_id is None or process_id not in self.output:
            return None
        self.tail_requests.append(process_id)
        return OutputTail(text=self.output[process_id])

    # -- the activities, by registered name --

    @activity.defn(name=ActivityName.CREATE_SANDBOX)
    async def create_sandbox(self, request: CreateSandboxInput) -> AgentStarted:
        self.create_inputs.append(request)
        spec = request.spec
        name = f"{spec.run_id}-{request.attempt}"
        existing = next((b for b in self.sandboxes.values() if b.name == name), None)
        if existing is not None:
            return AgentStarted(
                sandbox_id=existing.sandbox_id, process_id=existing.process_id, created=False
            )
        box = FakeSandbox(
            sandbox_id=f"box-{request.attempt}",
            name=name,
            attempt=request.attempt,
            labels={LABEL_RUN: spec.run_id, LABEL_ATTEMPT: str(request.attempt)},
            state="starting",
            file=checkpoint_ok(request.checkpoint) if request.checkpoint is not None else None,
        )
        self.sandboxes[box.sandbox_id] = box
        hold = self.create_holds.get(request.attempt)
        if hold is not None:
            await hold.wait()
        error = self.create_errors.get(request.attempt)
        if error is not None:
            raise error
        box.state = "running"
        box.process_id = f"agent-{request.attempt}-0"
        if self.lease is not None:
            box.lease_ends_at = _now() + self.lease
        self.log.append(f"create {box.sandbox_id}")
        self.starts.append(
            AgentStart(
                sandbox_id=box.sandbox_id,
                attempt=request.attempt,
                restart_reason=request.restart_reason,
                checkpoint=request.checkpoint,
                fresh_start=0,
                process_id=box.process_id,
            )
        )
        return AgentStarted(
            sandbox_id=box.sandbox_id, process_id=box.process_id, lease_ends_at=box.lease_ends_at
        )

    @activity.defn(name=ActivityName.ANSWER_AGENT)
    async def answer_agent(self, request: AnswerAgentInput) -> None:
        box = self._answering(request.sandbox_id)
        self.answers.append(request)
        self.log.append(f"answer {request.request_id} in {box.sandbox_id}")

    @activity.defn(name=ActivityName.CHECK_SPEC)
    async def check_spec(self, request: SpecCheckInput) -> SpecCheck:
        self.spec_checks.append(request)
        return SpecCheck(refusals=list(self.refusals))

    @activity.defn(name=ActivityName.START_AGENT)
    async def start_agent(self, request: StartAgentInput) -> AgentStarted:
        box = self._answering(request.sandbox_id)
        box.process_id = f"agent-{request.attempt}-{request.fresh_start}"
        if request.ci_round:
            box.process_id += f"-c{request.ci_round}"
        self.log.append(f"start agent in {box.sandbox_id}")
        self.starts.append(
            AgentStart(
                sandbox_id=box.sandbox_id,
                attempt=request.attempt,
                restart_reason=request.restart_reason,
                checkpoint=None,
                fresh_start=request.fresh_start,
                process_id=box.process_id,
                told=request.told,
            )
        )
        return AgentStarted(
            sandbox_id=box.sandbox_id,
            process_id=box.process_id,
            previous_output=self._tail(request.output_of),
        )

    @activity.defn(name=ActivityName.OBSERVE_AGENT)
    async def observe_agent(self, request: ObserveInput) -> Observation:
        self.observed.append(request)
        box = self._answering(request.sandbox_id)
        paused = self._lease_end(box)
        if paused is not None:
            return paused
        step = next(self._scripts.get(box.attempt, iter(())), Quiet())
        if isinstance(step, Hangs):
            try:
                await self._hang.wait()
            except asyncio.CancelledError:
                self.cancelled_observes += 1
                raise
            step = Quiet()
        if isinstance(step, WorkerDies):
            if step.meanwhile is not None:
                box.file = step.meanwhile
            await asyncio.Event().wait()  # cancelled only when the test's worker shuts down
        if isinstance(step, Overloaded):
            raise ApplicationError("[overloaded 529] Injected failure", type="ProviderUnavailable")
        if isinstance(step, StopsAnswering):
            box.answering = False
            raise Unreachable(box.sandbox_id)
        if isinstance(step, HandedOver):
            raise handed_over("the watch")
        if isinstance(step, SandboxStops):
            box.state = "stopped"
            box.stop_reason = step.reason
            return Observation(
                process_state="killed", sandbox_state="stopped", stop_reason=step.reason
            )
        if isinstance(step, SandboxPaused):
            box.state = "paused"
            return Observation(
                process_state="running",
                sandbox_state="paused",
                pause_reason=step.reason,
                lease_ends_at=box.lease_ends_at,
            )
        if isinstance(step, Exits):
            if step.final is not None:
                box.file = checkpoint_ok(step.final)
            return Observation(process_state="exited", exit_code=step.code, sandbox_state="running")
        if isinstance(step, Books):
            booked = GatewayBooks(
                usd=step.usd,
                answers=1,
                cap_refusals=step.cap_refusals,
                repeats=step.repeats,
                last_body=step.body,
            )
            return Observation(
                process_state="running",
                sandbox_state="running",
                gateway_books=booked if request.model_books_of else None,
            )
        if isinstance(step, Writes):
            box.file = step.read
            return Observation(
                process_state="running",
                sandbox_state="running",
                checkpoint=step.read if step.read.digest != request.known_digest else None,
            )
        return Observation(process_state="running", sandbox_state="running")

    @activity.defn(name=ActivityName.READ_CHECKPOINT)
    async def read_checkpoint(self, request: ReadCheckpointInput) -> CheckpointSalvage:
        box = self._answering(request.sandbox_id)
        tail = self._tail(request.output_of)
        if box.file is None or box.state == "stopped":
            found = CheckpointRead(status="missing")
        elif box.file.digest == request.known_digest:
            found = CheckpointRead(status="unchanged", digest=box.file.digest, size=box.file.size)
        else:
            found = box.file
        return CheckpointSalvage(**found.model_dump(), output_tail=tail)

    @activity.defn(name=ActivityName.SEND_NOTIFICATION)
    async def send_notification(self, note: Notification) -> SendResult:
        self.notifications.append(note)
        if self.notify_failures > 0 and self.notify_error is not None:
            self.notify_failures -= 1
            raise self.notify_error
        return SendResult(delivered=["spec-0"], undelivered=list(self.notify_undelivered))

    @activity.defn(name=ActivityName.DELIVER_NOTIFICATION)
    async def deliver_notification(self, request: DeliveryInput) -> None:
        self.deliveries.append(request)

    @activity.defn(name=ActivityName.PAUSE_SANDBOX)
    async def pause_sandbox(self, request: SandboxRef) -> SandboxInfo:
        box = self._answering(request.sandbox_id)
        hold = self.pause_holds.pop(request.sandbox_id, None)
        if hold is not None:
            await hold.wait()
        if self.pause_error is not None:
            raise self.pause_error
        if box.state in ("running", "starting"):
            box.state = "paused"
            self.paused.append(box.sandbox_id)
            self.log.append(f"pause {box.sandbox_id}")
        if request.keep_until is not None and box.state == "paused":
            self.kept_until[box.sandbox_id] = request.keep_until
        return box.info()

    @activity.defn(name=ActivityName.STOP_SANDBOX)
    async def stop_sandbox(self, request: SandboxRef) -> SandboxInfo:
        self.stop_attempts.append(activity.info().attempt)
        if self.stop_workers_die > 0:
            self.stop_workers_die -= 1
            await asyncio.Future()  # the dead worker's step: nothing ever comes of it
        box = self._answering(request.sandbox_id)
        if self.stop_error is not None:
            raise self.stop_error
        if box.state != "stopped":
            box.state = "stopped"
            box.stop_reason = "stopped by overnight"
            self.stopped.append(box.sandbox_id)
            self.log.append(f"stop {box.sandbox_id}")
        return box.info()

    @activity.defn(name=ActivityName.EXTEND_SANDBOX)
    async def extend_sandbox(self, request: ExtendSandboxInput) -> SandboxInfo:
        box = self._answering(request.sandbox_id)
        if box.lease_ends_at is not None and box.state == "running":
            # Runtime's rule: at most an hour ahead of now.
            box.lease_ends_at = min(request.until, _now() + timedelta(hours=1))
            self.extends.append((box.sandbox_id, box.lease_ends_at))
        return box.info()

    @activity.defn(name=ActivityName.WAKE_SANDBOX)
    async def wake_sandbox(self, request: SandboxRef) -> SandboxInfo:
        box = self._answering(request.sandbox_id)
        if box.state == "paused":
            box.state = "running"
            self.wakes.append(box.sandbox_id)
            if self.lease is not None:
                box.lease_ends_at = max(box.lease_ends_at or _now(), _now() + self.lease)
        return box.info()

    def _lease_end(self, box: FakeSandbox) -> Observation | None:
        """A running sandbox past its lease end pauses there, as Runtime's does."""
        if box.lease_ends_at is None or box.state != "running" or _now() < box.lease_ends_at:
            return None
        box.state = "paused"
        self.lease_pauses.append(box.sandbox_id)
        return Observation(
            process_state="running", sandbox_state="paused", lease_ends_at=box.lease_ends_at
        )

    @activity.defn(name=ActivityName.LIST_SANDBOXES)
    async def list_sandboxes(self, request: ListSandboxesInput) -> SandboxList:
        return SandboxList(
            sandboxes=[
                box.info()
                for box in self.sandboxes.values()
                if box.labels.get(LABEL_RUN) == request.run_id
                and (request.include_stopped or box.state != "stopped")
            ]
        )

    @activity.defn(name=ActivityName.FREE_RUN_STORE)
    async def free_run_store(self, request: RunStoreRef) -> RunStoreFreed:
        self.freed_stores.append(request.run_id)
        if request.egress_secret:
            self.erased_secrets.append(request.egress_secret)
        self.log.append(f"free store {request.run_id}")
        return RunStoreFreed()

    @activity.defn(name=ActivityName.SET_MODEL_CAP)
    async def set_model_cap(self, request: SetModelCapInput) -> bool:
        self.log.append(f"cap {request.sandbox_id} {request.model_allowance_usd}")
        self.caps.append((request.sandbox_id, request.model_allowance_usd, len(self.wakes)))
        return True

    @activity.defn(name=ActivityName.CHECK_SEARCH_ATTRIBUTES)
    async def check_search_attributes(
        self, request: SearchAttributeCheckInput
    ) -> SearchAttributeCheck:
        if self.search_attributes is None:
            raise ApplicationError("cannot list search attributes", type="PermissionDenied")
        return SearchAttributeCheck(present=list(self.search_attributes))

    def _answering(self, sandbox_id: str) -> FakeSandbox:
        box = self.sandboxes.get(sandbox_id)
        if box is None:
            raise ApplicationError(f"no sandbox {sandbox_id}", type="SandboxNotFound")
        if not box.answering:
            raise Unreachable(sandbox_id)
        return box


def _now() -> datetime:
    """Workflow time, as the (time-skipping) server scheduled the running activity."""
    return activity.info().current_attempt_scheduled_time
