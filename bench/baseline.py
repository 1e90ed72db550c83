"""The baseline: the seed's supervisor ported naively onto Temporal.

`NaiveAgentRun` does what the seed's loop did, one durable step at a time: sleep
`poll_seconds`, read the checkpoint, ask for the agent process, and on any error or a process
that is not running, create a new sandbox from the last checkpoint (through the same
`create_sandbox` activity and provider overnight uses). No long poll, no stall timer, no
budget beyond a restart cap, no cleanup of the old sandbox. It runs on its own task queue
(`bench.baseline_worker`) so both supervisors can share one server in a benchmark.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.models import (
        ActivityName,
        AgentStarted,
        CheckpointRead,
        CheckpointSalvage,
        CreateSandboxInput,
        ProcessState,
        ReadCheckpointInput,
        SandboxRef,
        SandboxSettled,
    )
    from overnight.core.models import Provider, RestartRecord, RunSpec
    from workflows import policies

BASELINE_TASK_QUEUE = "overnight-bench-baseline"
BASELINE_WORKFLOW = "NaiveAgentRun"
GET_PROCESS = "naive_get_process"

# The seed called each step once and restarted on any error: no activity retries.
NO_RETRY = RetryPolicy(maximum_attempts=1)
STEP_TIMEOUT = timedelta(minutes=2)


class ProcessRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: Provider
    sandbox_id: str
    process_id: str


class ProcessSeen(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: ProcessState
    exit_code: int | None = None


class NaiveStatus(BaseModel):
    """What the baseline's `status` query answers."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    attempt: int
    sandbox_id: str | None = None
    process_id: str | None = None
    checkpoint_bytes: int = 0
    last_checkpoint_at: datetime | None = None
    restarts: list[RestartRecord] = Field(default_factory=list)
    finished: bool = False


@workflow.defn(name=BASELINE_WORKFLOW)
class NaiveAgentRun:
    def __init__(self) -> None:
        self._status: NaiveStatus | None = None
        self._checkpoint: str | None = None

    @workflow.query(name="status")
    def status(self) -> NaiveStatus:
        if self._status is None:
            raise ApplicationError("the run has not started yet")
        return self._status

    @workflow.run
    async def run(self, spec: RunSpec) -> NaiveStatus:
        spec = RunSpec.model_validate(spec)
        st = NaiveStatus(run_id=spec.run_id, attempt=0)
        self._status = st
        await self._create(spec, st, reason="")
        while True:
            await workflow.sleep(spec.poll_seconds)
            assert st.sandbox_id is not None and st.process_id is not None
            try:
                read = await self._read_checkpoint(spec, st.sandbox_id)
                seen = await self._get_process(spec, st.sandbox_id, st.process_id)
            except ActivityError as err:
                await self._restart(spec, st, f"poll failed: {err.cause or err}")
                continue
            if read.status == "ok" and read.text is not None and read.text != self._checkpoint:
                self._checkpoint = read.text
                st.checkpoint_bytes = len(read.text.encode())
                st.last_checkpoint_at = workflow.now()
            if seen.state == "exited" and seen.exit_code == 0:
                await self._stop(spec, st.sandbox_id)
                st.finished = True
                return st
            if seen.state != "running":
                await self._restart(spec, st, f"agent {seen.state} (exit {seen.exit_code})")

    async def _restart(self, spec: RunSpec, st: NaiveStatus, reason: str) -> None:
        st.restarts.append(
            RestartRecord(
                attempt=st.attempt, reason=reason, at=workflow.now(), sandbox_id=st.sandbox_id
            )
        )
        if len(st.restarts) > spec.budget.max_restarts:
            raise ApplicationError(f"gave up after {len(st.restarts) - 1} restarts: {reason}")
        await self._create(spec, st, reason)

    async def _create(self, spec: RunSpec, st: NaiveStatus, reason: str) -> None:
        st.attempt += 1
        started: AgentStarted = await workflow.execute_activity(
            ActivityName.CREATE_SANDBOX,
            CreateSandboxInput(
                spec=spec, attempt=st.attempt, checkpoint=self._checkpoint, restart_reason=reason
            ),
            result_type=AgentStarted,
            start_to_close_timeout=policies.CREATE_TIMEOUT,
            heartbeat_timeout=policies.CREATE_HEARTBEAT,
            retry_policy=policies.CREATE_RETRY,
        )
        st.sandbox_id = started.sandbox_id
        st.process_id = started.process_id

    async def _read_checkpoint(self, spec: RunSpec, sandbox_id: str) -> CheckpointRead:
        # Naive: the whole file every time, changed or not.
        read: CheckpointRead = await workflow.execute_activity(
            ActivityName.READ_CHECKPOINT,
            ReadCheckpointInput(
                provider=spec.provider,
                sandbox_id=sandbox_id,
                checkpoint_path=spec.checkpoint_path,
                max_bytes=spec.max_checkpoint_bytes,
            ),
            # The activity answers a CheckpointSalvage (a CheckpointRead and maybe last words).
            result_type=CheckpointSalvage,
            start_to_close_timeout=STEP_TIMEOUT,
            retry_policy=NO_RETRY,
        )
        return read

    async def _get_process(self, spec: RunSpec, sandbox_id: str, process_id: str) -> ProcessSeen:
        seen: ProcessSeen = await workflow.execute_activity(
            GET_PROCESS,
            ProcessRef(provider=spec.provider, sandbox_id=sandbox_id, process_id=process_id),
            result_type=ProcessSeen,
            start_to_close_timeout=STEP_TIMEOUT,
            retry_policy=NO_RETRY,
        )
        return seen

    async def _stop(self, spec: RunSpec, sandbox_id: str) -> None:
        await workflow.execute_activity(
            ActivityName.STOP_SANDBOX,
            SandboxRef(provider=spec.provider, sandbox_id=sandbox_id),
            result_type=SandboxSettled,
            start_to_close_timeout=STEP_TIMEOUT,
            retry_policy=NO_RETRY,
        )
