"""The agent kit's requests in their own file beside the checkpoint (`agent-requests-file`):
an agent that saves its checkpoint its own way (no `overnight` key in it) still has its spend
counted and paused at the budget, its wait paused for and its results handed over; the
checkpoint's `overnight` key of the first protocol is still read, the file winning where both
hold a request of one kind; a file refused whole leaves what the last good one asked; a new
sandbox starts with no requests of the last one's agent.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.models import ActivityName, Observation, ObserveInput, RequestsRead
from fakes.activities import FakeWorld, Step, checkpoint_ok, exits, progress
from overnight.core.agent_requests import requests_in, requests_path
from overnight.core.models import Budget, BudgetExtension
from tests.workflows.harness import keep_history, make_spec, started_run, until_state
from tests.workflows.test_agent_run_talk import until_state_with

ASK = {"id": "q1-0123456789ab", "question": "Apply the migration?", "choices": ["yes", "no"]}


def own_checkpoint(step: int) -> str:
    """A checkpoint as an agent writes it its own way: no key of the kit's."""
    return json.dumps({"step": step, "next": f"step {step + 1}"})


@dataclass(frozen=True)
class FileSays:
    """The agent's kit (re)writes its requests file (`requests`), and then perhaps the agent
    its checkpoint (`checkpoint`), between two looks. `refused`: the file is refused whole."""

    requests: dict[str, Any]
    checkpoint: str | None = None
    refused: str | None = None


class RequestsWorld(FakeWorld):
    """FakeWorld whose agents also write the kit's requests file (`FileSays` steps)."""

    def __init__(self) -> None:
        super().__init__()
        self._file_steps: dict[int, list[Step | FileSays]] = {}

    def script(self, attempt: int, steps: Any) -> RequestsWorld:
        steps = list(steps)
        self._file_steps[attempt] = list(steps)
        super().script(attempt, [exits(99) if isinstance(s, FileSays) else s for s in steps])
        return self

    @activity.defn(name=ActivityName.OBSERVE_AGENT)
    async def observe_agent(self, request: ObserveInput) -> Observation:
        box = self._answering(request.sandbox_id)
        steps = self._file_steps.get(box.attempt) or []
        step = steps.pop(0) if steps else None
        if not isinstance(step, FileSays):
            return await FakeWorld.observe_agent(self, request)
        next(self._scripts[box.attempt])  # the parent's stand-in for this step
        self.observed.append(request)
        checkpoint = None
        if step.checkpoint is not None:
            box.file = checkpoint_ok(step.checkpoint)
            if box.file.digest != request.known_digest:
                checkpoint = box.file
        text = json.dumps(step.requests)
        digest = hashlib.sha256(text.encode()).hexdigest()
        said = None
        if request.requests_path is not None and digest != request.known_requests_digest:
            if step.refused is not None:
                said = RequestsRead(status="too_large", digest=digest, refused=step.refused)
            else:
                found = requests_in(step.requests)
                said = RequestsRead(
                    status="ok", digest=digest, requests=found, refused=found.refused
                )
        return Observation(
            process_state="running", sandbox_state="running", checkpoint=checkpoint, requests=said
        )


def usage(usd: float, stream: str = "a1-p42-1") -> dict[str, Any]:
    return {"stream": stream, "usd": usd, "input_tokens": 100, "model": "m"}


async def test_spend_of_an_agent_that_saves_its_own_checkpoint_is_counted_and_paused_at(
    client: Client,
) -> None:
    world = RequestsWorld()
    finished = {"summary": "spent", "outputs": {"steps": "3"}}
    world.script(
        1,
        [
            FileSays({"usage": usage(0.4)}, own_checkpoint(1)),
            FileSays({"usage": usage(2.0)}, own_checkpoint(2)),
            FileSays({"usage": usage(2.0), "finish": finished}, own_checkpoint(3)),
            exits(0),
        ],
    )
    spec = make_spec(budget=Budget(max_spend_usd=1.0))
    async with started_run(client, world, spec) as handle:
        waiting = await until_state(handle, "needs_attention")
        log_while_waiting = list(world.log)
        await handle.signal("extend_budget", BudgetExtension(spend_usd=5))
        result = await handle.result()
        await keep_history(handle, "requests_file")

    assert world.observed[0].requests_path == requests_path(spec.checkpoint_path)
    assert waiting.attention_reason is not None
    assert waiting.attention_reason.startswith("spend budget used up")
    assert waiting.spend_model_usd == 2.0
    assert log_while_waiting[-1] == "pause box-1"
    assert world.wakes == ["box-1"]
    assert [start.process_id for start in world.starts] == ["agent-1-0"]
    assert (result.restarts, result.attempts, result.spend_model_usd) == (0, 1, 2.0)
    assert result.outputs is not None and result.outputs.values == {"steps": "3"}
    assert json.loads(result.checkpoint or "{}") == {"step": 3, "next": "step 4"}


async def test_a_wait_in_the_file_pauses_though_the_checkpoint_never_holds_it(
    client: Client, time_skipping_env: WorkflowEnvironment
) -> None:
    world = RequestsWorld()
    now: datetime = await time_skipping_env.get_current_time()
    wait = {"id": "w1-0123456789ab", "until": (now + timedelta(hours=2)).isoformat()}
    world.script(1, [FileSays({"wait": wait}, own_checkpoint(1)), exits(0)])
    async with started_run(client, world, make_spec(stall_seconds=900)) as handle:
        paused = await until_state_with(handle, lambda s: s.talk and s.talk.waiting_until)
        result = await handle.result()

    assert paused.talk.waiting_until is not None
    assert world.paused == ["box-1"] and world.wakes == ["box-1"]
    assert [(a.request_id, a.answer) for a in world.answers] == [("w1-0123456789ab", "woken")]
    assert (result.outcome, result.restarts) == ("finished", 0)


async def test_the_checkpoints_key_is_still_read_and_the_file_wins_where_both_ask(
    client: Client,
) -> None:
    world = RequestsWorld()
    in_checkpoint = json.dumps(
        {
            "step": 1,
            "overnight": {
                "ask": {**ASK, "id": "q1-checkpoint", "question": "Older?"},
                "usage": usage(0.5, stream="a1-p7-1"),
            },
        }
    )
    world.script(1, [FileSays({"ask": ASK, "usage": usage(1.0)}, in_checkpoint), exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        waiting = await until_state(handle, "waiting_for_answer")
        await handle.execute_update("answer", "yes", result_type=str)
        result = await handle.result()

    assert waiting.talk is not None and waiting.talk.question == "Apply the migration?"
    assert [(a.request_id, a.answer) for a in world.answers] == [("q1-0123456789ab", "yes")]
    # Spend from both, once per stream.
    assert waiting.spend_model_usd == 1.5 and result.spend_model_usd == 1.5


async def test_a_refused_file_keeps_what_the_last_good_one_asked_and_says_why(
    client: Client,
) -> None:
    world = RequestsWorld()
    why = "the requests file is 600000 bytes, over the 524288 cap"
    world.script(
        1,
        [
            FileSays({"usage": usage(0.75)}),
            FileSays({"usage": usage(0.0)}, refused=why),
            exits(0),
        ],
    )
    async with started_run(client, world, make_spec()) as handle:
        refused = await until_state_with(handle, lambda s: s.talk and s.talk.refused)
        result = await handle.result()

    assert refused.talk.refused == why
    assert refused.spend_model_usd == 0.75 and result.spend_model_usd == 0.75


async def test_a_new_sandbox_starts_with_none_of_the_last_ones_requests(client: Client) -> None:
    world = RequestsWorld()
    world.script(1, [FileSays({"ask": ASK}, own_checkpoint(1))])
    world.script(2, [progress(own_checkpoint(2)), exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        await until_state(handle, "waiting_for_answer")
        world.box(1).state = "stopped"  # gone while it waited (its lease, a fault)
        await handle.execute_update("answer", "yes", result_type=str)
        result = await handle.result()

    # The next sandbox's agent did not ask again: nothing was asked there, nothing paused.
    assert world.paused == ["box-1"]
    assert (result.outcome, result.attempts) == ("finished", 2)
    assert world.observed[-1].known_requests_digest is None
