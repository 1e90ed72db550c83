"""Runs sharing one admission pool on the time-skipping server: each run has a `FakeWorld` and
a worker of its own (task queue), and every worker runs the pool's `OvernightAdmission` and its
activities with the same settings, as a worker pool does."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta

from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from activities.admission.activities import AdmissionActivities
from activities.models import ActivityName, SpecCheck, SpecCheckInput
from fakes.activities import FakeWorld
from overnight.core.admission import PLACES_QUERY, AdmissionSettings, AdmissionTerms
from overnight.core.admission import admission_workflow_id as pool_id
from overnight.core.models import RunResult, RunSpec
from tests.workflows.harness import HISTORIES, RECORD_ENV, Handle
from workflows.admission_run import OvernightAdmission
from workflows.agent_run import AgentRun
from workflows.notify_run import NotifyRun
from workflows.pure.admission_queue import Places


class PoolWorld(FakeWorld):
    """A FakeWorld whose worker puts every run in one pool (`check_spec`'s admission terms)."""

    def __init__(self, terms: AdmissionTerms, task_queue: str) -> None:
        super().__init__()
        self.terms = terms
        self.task_queue = task_queue
        # False: its runs are counted by no pool (they start at once and never ask).
        self.counted = True

    @activity.defn(name=ActivityName.CHECK_SPEC)
    async def check_spec(self, request: SpecCheckInput) -> SpecCheck:
        self.spec_checks.append(request)
        return SpecCheck(refusals=[], admission=self.terms if self.counted else None)


@asynccontextmanager
async def pool_of_one(
    client: Client,
    *worlds_of: str,
    settings: AdmissionSettings | None = None,
    admission: AdmissionActivities | None = None,
) -> AsyncIterator[dict[str, PoolWorld]]:
    """One world (and worker, on a task queue of its own) per name; the pool's admission
    workflow runs on the first's queue, and lets one run in at a time (its workers' settings,
    `settings` or one place). `admission`: the admission activities of every worker (by
    default the real ones, with `settings`)."""
    settings = settings or AdmissionSettings(max_runs=1)
    queues = {name: f"pool-{name}-{uuid.uuid4().hex[:8]}" for name in worlds_of}
    home = queues[worlds_of[0]]
    terms = AdmissionTerms(workflow_id=pool_id(home), task_queue=home, max_runs=settings.max_runs)
    worlds = {name: PoolWorld(terms, queues[name]) for name in worlds_of}
    async with AsyncExitStack() as stack:
        for world in worlds.values():
            await stack.enter_async_context(
                Worker(
                    client,
                    task_queue=world.task_queue,
                    workflows=[AgentRun, NotifyRun, OvernightAdmission],
                    activities=[
                        *world.activities(),
                        *(admission or AdmissionActivities(client, settings)).all(),
                    ],
                    max_heartbeat_throttle_interval=timedelta(milliseconds=100),
                    default_heartbeat_throttle_interval=timedelta(milliseconds=100),
                )
            )
        yield worlds


async def start(client: Client, world: PoolWorld, spec: RunSpec) -> Handle:
    handle: Handle = await client.start_workflow(
        "AgentRun", spec, id=spec.run_id, task_queue=world.task_queue, result_type=RunResult
    )
    return handle


async def places(client: Client, world: PoolWorld) -> Places:
    """What the pool's admission workflow holds (empty before the first run started it)."""
    handle = client.get_workflow_handle(world.terms.workflow_id)
    try:
        return await handle.query(PLACES_QUERY, result_type=Places)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        return Places()


async def keep_pool_history(client: Client, world: PoolWorld, name: str) -> None:
    """Check the pool's admission history in as tests/histories/admission/{name}.json when
    re-recording (`OVERNIGHT_RECORD_HISTORIES=1`; replayed by test_admission_replay.py)."""
    if os.environ.get(RECORD_ENV) != "1":
        return
    history = await client.get_workflow_handle(world.terms.workflow_id).fetch_history()
    folder = HISTORIES / "admission"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.json").write_text(history.to_json())


async def terminate(handle: Handle | None) -> None:
    with contextlib.suppress(RPCError):  # already closed
        if handle is not None:
            await handle.terminate(reason="test over")
