"""`FakeWorld` with the done check: each command of `done_when` answers from a script of
outcomes (pass, fail with an exit code, time out), and every check and every start the run
asked for is recorded for the test to read. A check sandbox (`prepare_done_check`) is a box of
its own, `check-<n>`, labelled with the run; its push can be made to fail (`push_problems`)
and its making to error (`prepare_errors`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.models import ActivityName, AgentStarted, RunDoneCheckInput, StartAgentInput
from activities.models.done_sandbox import DoneCheckSandbox, PrepareDoneCheckInput
from fakes.activities import FakeSandbox, FakeWorld, Hold
from overnight.core.constants import LABEL_CHECK, LABEL_RUN
from overnight.core.done_check import DoneCheck
from overnight.core.workspace_spec import check_ref_name

# A scripted outcome: 0 passes, another int fails with that exit code, "timeout" is ended.
Outcome = int | str
# The commit every fake push makes.
COMMIT = "c0ffee" + "0" * 34


class DoneWorld(FakeWorld):
    def __init__(self) -> None:
        super().__init__()
        self.checks: list[RunDoneCheckInput] = []
        self.outcomes: dict[str, list[Outcome]] = {}
        self.start_inputs: list[StartAgentInput] = []
        # Checks wait on this until released (or cancelled), when set.
        self.check_hold: Hold | None = None
        # The next checks fail like this (they could not be run at all).
        self.check_errors: list[ApplicationError] = []
        self.prepares: list[PrepareDoneCheckInput] = []
        # The next pushes of the work fail with these words (no check sandbox is made), and
        # the next check sandboxes cannot be made (made, then the error: half made).
        self.push_problems: list[str] = []
        self.prepare_errors: list[ApplicationError] = []
        # The next check sandbox, once made, waits on this until released (or cancelled).
        self.prepare_hold: Hold | None = None

    def check_outcomes(self, command: str, *outcomes: Outcome) -> DoneWorld:
        """What `command` does on its 1st, 2nd, ... run; then it passes."""
        self.outcomes[command] = list(outcomes)
        return self

    def activities(self) -> list[Callable[..., Any]]:
        return [*super().activities(), self.run_done_check, self.prepare_done_check]

    @activity.defn(name=ActivityName.PREPARE_DONE_CHECK)
    async def prepare_done_check(self, request: PrepareDoneCheckInput) -> DoneCheckSandbox:
        agent = self._answering(request.agent_sandbox_id)
        self.prepares.append(request)
        ref = check_ref_name(request.spec.run_id, request.number)
        if self.push_problems:
            self.log.append(f"push from {agent.sandbox_id} refused")
            return DoneCheckSandbox(ref=ref, problem=self.push_problems.pop(0))
        name = f"{request.spec.run_id}-check-{request.number}"
        box = next((b for b in self.sandboxes.values() if b.name == name), None)
        if box is None:
            box = FakeSandbox(
                sandbox_id=f"check-{request.number}",
                name=name,
                attempt=0,
                labels={LABEL_RUN: request.spec.run_id, LABEL_CHECK: str(request.number)},
            )
            if self.lease is not None:
                box.lease_ends_at = activity.info().current_attempt_scheduled_time + self.lease
            self.sandboxes[box.sandbox_id] = box
            self.log.append(f"make {box.sandbox_id} from {agent.sandbox_id}")
        if self.prepare_hold is not None:
            await self.prepare_hold.wait()
        if self.prepare_errors:
            raise self.prepare_errors.pop(0)
        return DoneCheckSandbox(
            sandbox_id=box.sandbox_id,
            ref=ref,
            commit=COMMIT,
            lease_ends_at=box.lease_ends_at,
        )

    @activity.defn(name=ActivityName.RUN_DONE_CHECK)
    async def run_done_check(self, request: RunDoneCheckInput) -> DoneCheck:
        box = self._answering(request.sandbox_id)
        self.checks.append(request)
        self.log.append(f"check {request.index} in {box.sandbox_id}")
        if self.check_hold is not None:
            await self.check_hold.wait()
        if self.check_errors:
            raise self.check_errors.pop(0)
        queue = self.outcomes.get(request.command, [])
        outcome = queue.pop(0) if queue else 0
        timed_out = outcome == "timeout"
        code = 124 if timed_out else int(outcome)
        passed = code == 0
        return DoneCheck(
            command=request.command,
            index=request.index,
            round=request.round,
            passed=passed,
            exit_code=code,
            timed_out=timed_out,
            seconds=request.timeout_seconds if timed_out else 0.5,
            tail="all good" if passed else f"FAILED: {request.command} said no",
            at=activity.info().current_attempt_scheduled_time,
            commit=request.commit,
            in_place=request.in_place,
        )

    @activity.defn(name=ActivityName.START_AGENT)
    async def start_agent(self, request: StartAgentInput) -> AgentStarted:
        self.start_inputs.append(request)
        started = await FakeWorld.start_agent(self, request)
        if not request.done_round:
            return started
        process_id = f"{started.process_id}-d{request.done_round}"
        self.box(request.attempt).process_id = process_id
        self.starts[-1].process_id = process_id
        return started.model_copy(update={"process_id": process_id})
