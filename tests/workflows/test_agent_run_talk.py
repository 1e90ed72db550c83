"""The agent speaks to its supervisor (the kit's requests, in the checkpoint): a question
pauses the sandbox until the `answer` update and the same process goes on; a `wait_until`
pauses it until then; reported model spend counts in the budget and, past it, pauses the agent
in place until `extend_budget`; `finish()`'s outputs come back in the result.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from fakes.activities import FakeWorld, Quiet, exits, progress
from overnight.core.models import Budget, BudgetExtension
from tests.workflows.harness import keep_history, make_spec, started_run, status_of, until_state


def kit_checkpoint(step: int, **requests: Any) -> str:
    """A checkpoint as the kit leaves it, with its requests under `overnight`."""
    return json.dumps({"step": step, "next": f"step {step + 1}", "overnight": requests})


ASK = {"id": "q1-0123456789ab", "question": "Apply the migration?", "choices": ["yes", "no"]}
FINISHED = {"summary": "migration applied", "outputs": {"pr": "https://example.test/pr/7"}}


async def test_a_question_pauses_the_sandbox_and_the_answer_wakes_the_same_agent(
    client: Client, world: FakeWorld
) -> None:
    world.script(
        1,
        [
            progress(kit_checkpoint(1, ask=ASK)),
            progress(kit_checkpoint(2, finish=FINISHED)),
            exits(0),
        ],
    )
    async with started_run(client, world, make_spec()) as handle:
        waiting = await until_state(handle, "waiting_for_answer")
        assert world.log[-1] == "pause box-1"
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("answer", "maybe", result_type=str)
        assert "one of: yes, no" in str(refused.value.cause)
        said = await handle.execute_update("answer", "yes", result_type=str)
        with pytest.raises(WorkflowUpdateFailedError) as again:
            await handle.execute_update("answer", "no", result_type=str)
        assert "no question is waiting" in str(again.value.cause)
        result = await handle.result()
        ended = await status_of(handle)
        await keep_history(handle, "asked_answered")

    assert waiting.talk is not None and waiting.talk.question == "Apply the migration?"
    assert waiting.talk.choices == ["yes", "no"]
    assert said == "answered q1-0123456789ab"
    # The same sandbox and agent went on: woken, answered, no second sandbox or start.
    assert world.wakes == ["box-1"]
    assert [(a.request_id, a.answer) for a in world.answers] == [("q1-0123456789ab", "yes")]
    assert [start.process_id for start in world.starts] == ["agent-1-0"]
    assert "waiting_for_answer" in world.notified()
    asked = next(n for n in world.notifications if n.event == "waiting_for_answer")
    assert asked.reason == "Apply the migration? (answer one of: yes, no)"
    assert result.outputs is not None and result.outputs.values == FINISHED["outputs"]
    assert (result.restarts, result.attempts) == (0, 1)
    finished = next(n for n in world.notifications if n.event == "finished")
    assert "migration applied" in finished.reason and "https://example.test/pr/7" in finished.reason
    assert ended.outputs is not None and ended.outputs.summary == "migration applied"


async def test_an_unanswered_question_needs_attention_after_attention_hours(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    world.script(1, [progress(kit_checkpoint(1, ask=ASK)), exits(0)])
    spec = make_spec(attention_hours=1)
    async with started_run(client, world, spec) as handle:
        await until_state(handle, "waiting_for_answer")
        await time_skipping_env.sleep(timedelta(minutes=61))
        attention = await until_state(handle, "needs_attention")
        # Still answerable: the answer wakes the same agent.
        await handle.execute_update("answer", "no", result_type=str)
        result = await handle.result()

    assert attention.attention_reason == "the agent's question waited 1 h unanswered"
    assert world.notified()[:2] == ["waiting_for_answer", "needs_attention"]
    assert world.wakes == ["box-1"]
    assert (result.outcome, result.restarts) == ("finished", 0)
    # Waiting is not run time.
    assert result.hours_used < 0.1


async def test_a_question_nobody_answers_fails_the_run_in_the_end(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress(kit_checkpoint(1, ask=ASK))])
    async with started_run(client, world, make_spec(attention_hours=1)) as handle:
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "OutOfBudget"
    assert "nobody answered its agent's question within 2 h (Apply the migration?)" in str(cause)


async def test_wait_until_five_hours_costs_no_restart_no_stall_and_no_run_time(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    now: datetime = await time_skipping_env.get_current_time()
    until = now + timedelta(hours=5)
    wait = {"id": "w1-0123456789ab", "until": until.isoformat(), "reason": "usage window"}
    world.script(1, [progress(kit_checkpoint(1, wait=wait)), exits(0)])
    spec = make_spec(stall_seconds=900, poll_seconds=60)
    async with started_run(client, world, spec) as handle:
        paused = await until_state_with(handle, lambda s: s.talk and s.talk.waiting_until)
        result = await handle.result()
        await keep_history(handle, "wait_until")

    assert paused.state == "running" and paused.talk is not None
    assert paused.talk.waiting_reason == "usage window"
    assert world.paused == ["box-1"] and world.wakes == ["box-1"]
    assert [(a.request_id, a.answer) for a in world.answers] == [("w1-0123456789ab", "woken")]
    assert (result.restarts, result.attempts) == (0, 1)
    assert result.hours_used < 0.1
    ended_at: datetime = await time_skipping_env.get_current_time()
    assert ended_at - now >= timedelta(hours=5)


async def test_an_answered_question_beside_a_far_wait_pauses_once_for_each(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    """A checkpoint may hold both (an agent writes its own bytes): the question is answered
    once and the wait (3 h, past the 2 run hours: waiting is not run time) is waited once;
    they do not take turns."""
    now: datetime = await time_skipping_env.get_current_time()
    far = {
        "id": "w2-0123456789ab",
        "until": (now + timedelta(hours=3)).isoformat(),
        "reason": "[quota](https://evil.example)",
    }
    world.script(
        1,
        [
            progress(kit_checkpoint(1, ask=ASK)),
            progress(kit_checkpoint(2, ask=ASK, wait=far)),
            Quiet(),  # a look after the wait: the two marks took turns here
            exits(0),
        ],
    )
    spec = make_spec(budget=Budget(max_hours=2), poll_seconds=60)
    async with started_run(client, world, spec) as handle:
        await until_state(handle, "waiting_for_answer")
        await handle.execute_update("answer", "yes", result_type=str)
        result = await handle.result()
        summaries = await activity_summaries(client, handle)

    # The agent's reason is in the pause's summary (Markdown in the Web UI) as written.
    [paused] = [text for text in summaries if text.startswith("pause sandbox box-1 (wait")]
    assert paused.endswith(r"UTC: \[quota\](https://evil.example))")
    assert world.paused == ["box-1", "box-1"] and world.wakes == ["box-1", "box-1"]
    assert [(a.request_id, a.answer) for a in world.answers] == [
        ("q1-0123456789ab", "yes"),
        ("w2-0123456789ab", "woken"),
    ]
    assert (result.outcome, result.restarts, result.attempts) == ("finished", 0, 1)


async def test_model_spend_past_the_budget_pauses_in_place_and_extension_wakes_it(
    client: Client, world: FakeWorld
) -> None:
    usage = {"stream": "a1-p42-1", "usd": 0.4, "input_tokens": 1000, "output_tokens": 10}
    more = {**usage, "usd": 1.5, "input_tokens": 9000}
    world.script(
        1,
        [
            progress(kit_checkpoint(1, usage=usage)),
            progress(kit_checkpoint(2, usage=more)),
            exits(0),
        ],
    )
    spec = make_spec(budget=Budget(max_spend_usd=1.0))
    async with started_run(client, world, spec) as handle:
        waiting = await until_state(handle, "needs_attention")
        log_while_waiting = list(world.log)
        await handle.signal("extend_budget", BudgetExtension(spend_usd=5))
        result = await handle.result()
        await keep_history(handle, "model_spend_paused")

    assert waiting.attention_reason is not None
    assert waiting.attention_reason.startswith("spend budget used up")
    assert waiting.spend_model_usd == 1.5 and waiting.spend_usd >= 1.5
    assert waiting.talk is not None and waiting.talk.model_input_tokens == 9000
    assert log_while_waiting[-1] == "pause box-1"
    # Zero steps redone: the same sandbox woken, the same agent, no second create.
    assert world.wakes == ["box-1"]
    assert [start.process_id for start in world.starts] == ["agent-1-0"]
    assert (result.restarts, result.attempts, result.spend_model_usd) == (0, 1, 1.5)


async def activity_summaries(client: Client, handle: Any) -> list[str]:
    """The summaries of the run's activities, as the Web UI shows them."""
    found = []
    async for event in handle.fetch_history_events():
        if event.HasField("user_metadata") and event.user_metadata.HasField("summary"):
            summary = event.user_metadata.summary
            found.append(client.data_converter.payload_converter.from_payload(summary, str))
    return found


async def until_state_with(handle: Any, accept: Any) -> Any:
    from tests.workflows.harness import eventually

    return await eventually(lambda: status_of(handle), lambda status: bool(accept(status)))


async def test_an_answer_whose_sandbox_is_gone_reaches_the_next_attempt_through_the_kit(
    client: Client, world: FakeWorld
) -> None:
    asked = kit_checkpoint(1, ask=ASK)
    world.script(1, [progress(asked)])
    world.script(2, [Quiet(), exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        await until_state(handle, "waiting_for_answer")
        world.box(1).state = "stopped"  # gone while it waited (its lease, a fault)
        await handle.execute_update("answer", "yes", result_type=str)
        result = await handle.result()

    second = world.creates()[1]
    # The new sandbox starts from the checkpoint holding the question; its agent asks again
    # and the answer already given is written there at once, with no second wait.
    assert second.checkpoint == asked
    assert [(a.request_id, a.answer, a.sandbox_id) for a in world.answers] == [
        ("q1-0123456789ab", "yes", "box-2")
    ]
    assert world.notified().count("waiting_for_answer") == 1
    assert (result.outcome, result.attempts) == ("finished", 2)
