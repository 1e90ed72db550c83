"""What no retry fixes fails the run at once (workflows/pure/hopeless.py), on the time-skipping
server: a first create refused for good, and an agent whose command was not found at its first
start. Each fails with one line saying what to fix and to start again; no restart is spent,
no person is waited for. A later create refused, or an exit 127 after a checkpoint, keeps the
old way."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from activities.providers.local.state import WORKER_NOT_READY
from fakes.activities import FakeWorld, exits, progress
from overnight.core.errors import SPEC_UNUSABLE
from overnight.core.models import Budget, BudgetExtension
from overnight.core.retry_note import RETRY_NOTE_SIGNAL, RetryNote
from tests.waits import CAP
from tests.workflows.harness import (
    eventually,
    keep_history,
    make_spec,
    started_run,
    status_of,
    until_state,
)

AGAIN = "no retry can fix this: fix the spec (or the worker) and start the run again"
NOT_FOUND = (
    "field repo: cloning http://127.0.0.1:9/x.git: repository not found "
    "(fatal: repository 'http://127.0.0.1:9/x.git/' not found)"
)


async def test_a_first_create_refused_for_good_fails_the_run_at_once_with_one_line(
    client: Client, world: FakeWorld
) -> None:
    world.create_errors[1] = ApplicationError(NOT_FOUND, type=SPEC_UNUSABLE, non_retryable=True)
    spec = make_spec()
    async with started_run(client, world, spec) as handle:
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "fail_fast_create_refused")

    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    assert (cause.type, cause.non_retryable) == (SPEC_UNUSABLE, True)
    assert cause.message == f"run {spec.run_id} cannot start: {NOT_FOUND}; {AGAIN}"
    assert (status.state, status.failure, status.attention_reason) == (
        "failed",
        cause.message,
        None,
    )
    assert (status.attempt, status.restarts_used) == (1, 0)
    assert len(world.create_inputs) == 1
    assert world.state_of(1) == "stopped"  # the half-made sandbox
    assert world.notified()[-1] == "failed"


async def test_a_command_not_found_at_its_first_start_fails_the_run_without_a_restart(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [exits(127)])
    world.output["agent-1-0"] = "/bin/sh: 1: pyhton3: not found\n"
    spec = make_spec().model_copy(update={"command": "pyhton3 /workspace/agent/main.py"})
    async with started_run(client, world, spec) as handle:
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "fail_fast_command_not_found")

    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == SPEC_UNUSABLE
    assert cause.message == (
        f"run {spec.run_id}: the agent's command was not found (exit 127 at its first start, "
        "before any checkpoint; field command: pyhton3 /workspace/agent/main.py); "
        f"it said: /bin/sh: 1: pyhton3: not found; {AGAIN}"
    )
    assert (status.state, status.failure) == ("failed", cause.message)
    assert (status.attempt, status.restarts_used, len(world.creates())) == (1, 0, 1)
    # Kept paused for a look (`overnight logs`), as a failed attempt's sandbox is.
    assert world.state_of(1) == "paused"


async def test_exit_127_after_a_checkpoint_is_a_crash_and_restarts(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(127)])
    world.script(2, [exits(0, final="cp-2")])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()

    assert (result.outcome, result.restarts) == ("finished", 1)
    assert world.creates()[1].restart_reason == "agent crashed (exit 127)"


async def test_a_later_create_refused_still_waits_for_a_person(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(1)])
    world.create_errors[2] = ApplicationError(NOT_FOUND, type=SPEC_UNUSABLE, non_retryable=True)
    async with started_run(client, world, make_spec()) as handle:
        waiting = await until_state(handle, "needs_attention")
        await handle.signal("cancel")
        await handle.result()

    assert waiting.attention_reason == f"could not create sandbox 2: {SPEC_UNUSABLE}: {NOT_FOUND}"
    assert waiting.failure is None


async def test_a_first_create_refused_for_what_the_worker_lacks_waits_for_a_person(
    client: Client, world: FakeWorld
) -> None:
    """A bind's folder missing on the worker is the worker's to fix, not the spec's: the run
    needs attention (a person makes the folder and extends it) rather than failing."""
    missing = "binds: /srv/data does not exist on this worker"
    world.create_errors[1] = ApplicationError(missing, type=WORKER_NOT_READY, non_retryable=True)
    async with started_run(client, world, make_spec()) as handle:
        waiting = await until_state(handle, "needs_attention")
        await handle.signal("cancel")
        await handle.result()

    assert missing in (waiting.attention_reason or "")
    assert waiting.failure is None


async def test_the_card_says_what_a_create_waits_on_until_it_is_made(
    client: Client, world: FakeWorld
) -> None:
    hold = world.hold_create(1)
    world.script(1, [exits(0, final="done")])
    note = RetryNote(
        activity="create sandbox",
        sandbox_attempt=1,
        next_try=9,
        max_tries=16,
        message="cloning http://git.example/x.git: connection refused",
        next_at=datetime(2026, 12, 2, 14, 5, 10, tzinfo=UTC),
    )
    async with started_run(client, world, make_spec()) as handle:
        await asyncio.wait_for(hold.started.wait(), timeout=CAP)
        # A late note, of another attempt's create, is not taken.
        await handle.signal(RETRY_NOTE_SIGNAL, note.model_copy(update={"sandbox_attempt": 2}))
        await handle.signal(RETRY_NOTE_SIGNAL, note)
        waiting = await eventually(lambda: status_of(handle), lambda st: bool(st.waiting_on))
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        hold.release.set()
        result = await handle.result()
        after = await status_of(handle)
        await keep_history(handle, "fail_fast_waiting_on")

    line = (
        "create sandbox, try 9 of 16, next at 14:05:10 UTC: "
        "cloning http://git.example/x.git: connection refused"
    )
    assert (waiting.state, waiting.waiting_on) == ("starting", line)
    card = metadata.current_details
    assert "- **waiting on** create sandbox, try 9 of 16, next at 14:05:10 UTC: cloning " in card
    assert (result.outcome, after.waiting_on) == ("finished", None)


async def test_an_extension_after_a_later_create_failed_spends_no_second_restart(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(1)])
    world.create_errors[2] = ApplicationError(NOT_FOUND, type=SPEC_UNUSABLE, non_retryable=True)
    world.script(3, [exits(0, final="cp-3")])
    async with started_run(client, world, make_spec(budget=Budget(max_restarts=1))) as handle:
        waiting = await until_state(handle, "needs_attention")
        # Hours, not restarts: the restart was counted when the crash was seen.
        await handle.signal("extend_budget", BudgetExtension(hours=1))
        result = await handle.result()
        await keep_history(handle, "fail_fast_extended_after_create")

    assert waiting.restarts_used == 1
    assert (result.outcome, result.restarts, result.attempts) == ("finished", 1, 3)
    assert world.creates()[1].checkpoint == "cp-1"
