"""AgentRun asks its worker what the spec may ask for before anything is made: a spec the
worker's grants refuse fails the run at once as `SpecRefused`, naming the field (the grants
themselves, and each refusal on a real worker: tests/activities/test_grants.py,
tests/e2e/test_spec_grants.py)."""

from __future__ import annotations

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from fakes.activities import FakeWorld, exits, progress
from overnight.core.grants import SPEC_REFUSED
from tests.workflows.harness import keep_history, make_spec, started_run

REFUSAL = (
    "field secret_env: RUNTIME_API_KEY is not in this worker's allow-list (start the worker "
    "with OVERNIGHT_SECRET_ENV=RUNTIME_API_KEY to allow it)"
)


async def test_a_spec_the_worker_refuses_fails_at_once_before_any_sandbox_is_made(
    client: Client, world: FakeWorld
) -> None:
    world.refusals = [REFUSAL]
    spec = make_spec(secret_env=["RUNTIME_API_KEY"])
    async with started_run(client, world, spec) as handle:
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        described = await handle.describe()
        await keep_history(handle, "spec_refused")

    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == SPEC_REFUSED and cause.non_retryable
    assert cause.message == f"spec: {REFUSAL}"
    assert described.status == WorkflowExecutionStatus.FAILED
    assert [check.spec.secret_env for check in world.spec_checks] == [["RUNTIME_API_KEY"]]
    assert world.create_inputs == [] and world.log == []


async def test_a_spec_the_worker_allows_is_checked_once_and_runs(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(1)])
    world.script(2, [exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()

    assert (result.outcome, result.attempts) == ("finished", 2)
    # Once, at the start: the restart's create is checked by the create itself.
    assert len(world.spec_checks) == 1
