"""The task of `bench.coding_agents` and its fake model: the shell command of each tool call,
the model that answers as a function of the conversation (so a fresh run is asked for every
call again and a resumed session only for the one the kill interrupted), and the list prices
the lost turns are counted at. Apart from the runs, so the runs and the rows read one
definition of the task."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

from activities.coding_agent.setup import DEFAULT_PRICES
from fakes.model_api import RecordedRequest, Script, Shell, text, tools
from fakes.model_api.script import Choice
from fakes.model_api.turns import Answer

TASK = "Run the ten steps of the task, one shell command each, in order."
# USD per million tokens, list prices: Claude Code's default model family (Sonnet), and
# Codex's (the worker's own default table, activities/coding_agent/setup.py).
LIST_PRICES: dict[str, tuple[str, float, float]] = {
    "claude-code": ("Claude Sonnet", 3.0, 15.0),
    "codex": (
        "gpt-5-codex",
        DEFAULT_PRICES["gpt-5-codex"]["input_per_mtok"],
        DEFAULT_PRICES["gpt-5-codex"]["output_per_mtok"],
    ),
}


def cost(kind: str, tokens_in: int, tokens_out: int) -> float:
    """USD of these tokens at the kind's list price."""
    _, per_in, per_out = LIST_PRICES[kind]
    return (tokens_in * per_in + tokens_out * per_out) / 1e6


@dataclass(frozen=True)
class Answered:
    """One request the model answered: with call `call` (0: the final text)."""

    number: int
    call: int
    redone: bool  # this call (or the final text) was asked for before in this sample
    input_tokens: int
    output_tokens: int


def command(call: int, crash_at: int, marker: str) -> str:
    """Call `call`'s shell command: a line in steps.txt, then `step N ok` (printed, so the
    result holds it but the command does not). Call `crash_at` sleeps until `marker` exists
    (the bench makes it before the kill): its CLI dies during it, its redo goes on."""
    wait = f" && {{ [ -e {marker} ] || exec sleep 60; }}" if call == crash_at else ""
    return f"echo {call} >> steps.txt{wait} && printf 'step %s ok\\n' {call}"


class TaskModel(Script):
    """The fake model of the task: a function of the conversation (see bench/coding_agents.py)."""

    def __init__(self, calls: int, crash_at: int, marker: str) -> None:
        super().__init__([])
        self.calls = calls
        self.crash_at = crash_at
        self.marker = marker
        self.answered: list[Answered] = []
        self._asked: set[int] = set()
        self._model_lock = threading.Lock()

    def choose(self, request: RecordedRequest) -> Choice:
        outputs = [result.output for result in request.tool_results()]
        done = {i for i in range(1, self.calls + 1) if any(f"step {i} ok" in o for o in outputs)}
        call = next((i for i in range(1, self.calls + 1) if i not in done), 0)
        tokens_in = max(1, len(json.dumps(request.body)) // 4)
        turn: Answer
        if call:
            shell = command(call, self.crash_at, self.marker)
            tokens_out = 20 + len(shell) // 4
            turn = tools(
                Shell(shell),
                label=f"call {call}",
                input_tokens=tokens_in,
                output_tokens=tokens_out,
            )
        else:
            tokens_out = 20
            turn = text(
                f"All {self.calls} steps done.",
                label="final",
                input_tokens=tokens_in,
                output_tokens=tokens_out,
            )
        with self._model_lock:
            redone = call in self._asked
            self._asked.add(call)
            self.answered.append(Answered(request.number, call, redone, tokens_in, tokens_out))
        return Choice(call - 1 if call else self.calls, turn)

    def answer_of(self, number: int) -> Answered | None:
        with self._model_lock:
            return next((a for a in self.answered if a.number == number), None)
