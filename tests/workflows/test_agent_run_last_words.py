"""AgentRun keeps each ended agent's last words and tells the run's webhooks, once per change.

The activities are the FakeWorld's: the tail it hands back stands for what the worker read
(and redacted); a notification is what the workflow asked the worker to send.
"""

from __future__ import annotations

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from fakes.activities import FakeWorld, exits, note, progress
from overnight.core.models import BudgetExtension, RunResult
from overnight.core.notify_spec import Webhook
from tests.workflows.harness import (
    eventually,
    keep_history,
    make_spec,
    started_run,
    status_of,
    until_state,
)
from workflows import policies
from workflows.notify_steps import notify_workflow_id
from workflows.pure.run_record import TAILS_KEPT

HOOK = Webhook(url="http://127.0.0.1:9/hook")


async def test_a_crashed_attempts_last_words_are_kept_in_its_restart_record_and_the_status(
    client: Client, world: FakeWorld
) -> None:
    world.output["agent-1-0"] = "step 1 done\nTraceback: boom\nexit 3"
    world.output["agent-2-0"] = "all steps done"
    world.script(1, [progress("cp-1"), exits(3)])
    world.script(2, [exits(0, final=note("done"))])
    async with started_run(client, world, make_spec(notify=[HOOK])) as handle:
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "crash_last_words")

    assert result.outcome == "finished"
    [record] = status.restarts
    assert record.output_tail == "step 1 done\nTraceback: boom\nexit 3"
    assert status.last_words is not None
    assert (status.last_words.attempt, status.last_words.reason) == (2, "finished (exit 0)")
    assert status.last_words.tail == "all steps done"
    # The tail of the process that ended was asked for, each once.
    assert world.tail_requests == ["agent-1-0", "agent-2-0"]
    # Restarts are only sent when asked (the worker filters): the run still tells each one.
    assert world.notified() == ["restart", "finished"]
    restart, finished = world.notifications
    assert restart.event_id.endswith("-1") and finished.event_id.endswith("-2")
    assert restart.output_tail == "step 1 done\nTraceback: boom\nexit 3"
    assert (finished.state, finished.output_tail) == ("finished", "all steps done")
    assert finished.webhooks == [HOOK]


async def test_a_fresh_context_start_keeps_the_ended_agents_last_words(
    client: Client, world: FakeWorld
) -> None:
    world.output["agent-1-0"] = "context is full, summarised"
    world.script(1, [progress("cp-1"), exits(75), exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        await handle.result()
        status = await status_of(handle)

    assert world.tail_requests[0] == "agent-1-0"
    assert status.restarts == []
    assert status.fresh_starts_used == 1
    # The fresh agent printed nothing the world knows of: the words kept are the first's.
    assert status.last_words is not None
    assert status.last_words.reason == "context window full (exit 75)"
    assert (status.last_words.attempt, status.last_words.fresh_start) == (1, 0)
    assert status.last_words.tail == "context is full, summarised"


async def test_needs_attention_is_told_once_with_the_last_words_and_the_budget_left(
    client: Client, world: FakeWorld
) -> None:
    world.output["agent-1-0"] = "about to fail\nValueError: no"
    world.script(1, [progress("cp-1"), exits(2)])
    world.script(2, [exits(0)])
    spec = make_spec(notify=[HOOK], budget={"max_restarts": 0})
    async with started_run(client, world, spec) as handle:
        waiting = await until_state(handle, "needs_attention")
        assert waiting.last_words is not None
        assert waiting.last_words.reason == "agent crashed (exit 2)"
        await eventually(lambda: _count(world), lambda n: n == 1)
        await handle.signal("extend_budget", BudgetExtension(restarts=1))
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "needs_attention_notified")

    assert result.outcome == "finished"
    assert world.notified() == ["needs_attention", "restart", "finished"]
    attention = world.notifications[0]
    assert attention.state == "needs_attention"
    assert attention.reason == "agent crashed (exit 2); restart budget used up (0 of 0)"
    assert attention.output_tail == "about to fail\nValueError: no"
    assert attention.budget_left.restarts == 0
    # The restart made after the extension carries the tail read when the run stopped.
    [record] = status.restarts
    assert record.output_tail == "about to fail\nValueError: no"


async def test_a_run_nobody_extends_tells_of_its_failure_before_it_fails(
    client: Client, world: FakeWorld
) -> None:
    world.output["agent-1-0"] = "no more ideas"
    world.script(1, [exits(1)])
    spec = make_spec(notify=[HOOK], budget={"max_restarts": 0}, attention_hours=1)
    async with started_run(client, world, spec) as handle:
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        await keep_history(handle, "failed_notified")

    assert world.notified() == ["needs_attention", "failed"]
    failed = world.notifications[1]
    assert (failed.state, failed.output_tail) == ("failed", "no more ideas")
    assert "nobody extended it within 1 h" in failed.reason


async def test_a_cancelled_run_tells_of_it_with_the_reason(
    client: Client, world: FakeWorld
) -> None:
    world.output["agent-1-0"] = "halfway there"
    world.script(1, [progress("cp-1")])
    async with started_run(client, world, make_spec(notify=[HOOK])) as handle:
        await eventually(lambda: status_of(handle), lambda s: s.checkpoint_bytes > 0)
        await handle.signal("cancel", "wrong branch")
        result = await handle.result()
        status = await status_of(handle)

    assert result.outcome == "cancelled"
    assert world.notified() == ["cancelled"]
    assert world.notifications[0].reason == "wrong branch"
    assert status.last_words is not None
    assert (status.last_words.reason, status.last_words.tail) == (
        "cancelled: wrong branch",
        "halfway there",
    )


async def test_a_notification_that_cannot_be_sent_never_holds_up_or_fails_the_run(
    private_env: WorkflowEnvironment, world: FakeWorld
) -> None:
    # A server of its own: one that ran a child workflow of a closed run stops skipping time.
    client = private_env.client
    # Every try the run makes fails (its worker dies each time, say).
    world.notify_error = ApplicationError("worker lost", type="WorkerLost")
    world.notify_failures = policies.NOTIFY_RETRY.maximum_attempts
    world.script(1, [progress("cp-1"), exits(0)])
    async with started_run(client, world, make_spec(notify=[HOOK])) as handle:
        result = await handle.result()
        retry = client.get_workflow_handle(notify_workflow_id(result.run_id, 1))
        await eventually(
            lambda: retry.describe(), lambda d: d.status == WorkflowExecutionStatus.COMPLETED
        )
        await keep_history(handle, "notify_retried")

    assert isinstance(result, RunResult) and result.outcome == "finished"
    # The retry workflow tried every target again (the run's tries said nothing of them).
    assert world.notified() == ["finished"] * (policies.NOTIFY_RETRY.maximum_attempts + 1)


async def test_targets_a_first_try_missed_are_tried_again_one_by_one(
    private_env: WorkflowEnvironment, world: FakeWorld
) -> None:
    # A server of its own: one that ran a child workflow of a closed run stops skipping time.
    client = private_env.client
    world.notify_undelivered = ["worker-0"]
    world.script(1, [exits(0)])
    async with started_run(client, world, make_spec(notify=[HOOK])) as handle:
        result = await handle.result()
        retry = client.get_workflow_handle(notify_workflow_id(result.run_id, 1))
        await eventually(
            lambda: retry.describe(), lambda d: d.status == WorkflowExecutionStatus.COMPLETED
        )

    assert world.notified() == ["finished"]
    assert [(d.target, d.notification.event) for d in world.deliveries] == [
        ("worker-0", "finished")
    ]


async def test_restart_records_keep_tails_only_for_the_newest_ones(
    client: Client, world: FakeWorld
) -> None:
    crashes = TAILS_KEPT + 2
    for attempt in range(1, crashes + 1):
        world.output[f"agent-{attempt}-0"] = f"attempt {attempt} died"
        world.script(attempt, [exits(1)])
    world.script(crashes + 1, [exits(0)])
    async with started_run(client, world, make_spec(budget={"max_restarts": 20})) as handle:
        await handle.result()
        status = await status_of(handle)

    tails = [record.output_tail for record in status.restarts]
    assert tails[:2] == [None, None]
    assert tails[2:] == [f"attempt {n} died" for n in range(3, crashes + 1)]


async def test_a_worker_without_notifications_costs_the_run_nothing(
    client: Client, world: FakeWorld
) -> None:
    # A worker (a benchmark's, say) that lacks the activity: no retry workflow is started.
    world.notify_error = ApplicationError("not registered", type="NotFoundError")
    world.notify_failures = policies.NOTIFY_RETRY.maximum_attempts
    world.script(1, [exits(0)])
    async with started_run(client, world, make_spec(notify=[HOOK])) as handle:
        result = await handle.result()

    assert result.outcome == "finished"
    assert world.notified() == ["finished"] * policies.NOTIFY_RETRY.maximum_attempts
    assert not await _exists(client, notify_workflow_id(result.run_id, 1))


async def _exists(client: Client, workflow_id: str) -> bool:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError:
        return False
    return True


async def _count(world: FakeWorld) -> int:
    return len(world.notifications)
