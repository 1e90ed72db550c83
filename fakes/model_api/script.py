"""Which turn answers which request: pure logic (a lock, no I/O), shared by every API.

A script is a list of turns used in order. Each request takes the first turn still pending
whose `when` accepts it (a turn without `when` accepts any request), so a turn with a
predicate waits, in its place, for a request it accepts while later turns answer the others.
A turn with `times=N` answers N requests before it is used up. A request no pending turn
accepts is answered by `when_exhausted` (default: a final text that says so), and is counted
in `unmatched`, so a test can check that its script fit.

Predicates for `when` (functions of a `RecordedRequest`): `after_tool_result` (the last thing
sent is a tool result), `carries(text)` (the conversation holds the text), `session(id)`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from fakes.model_api.recorded import RecordedRequest
from fakes.model_api.turns import Answer, Predicate, Text

EXHAUSTED_TEXT = "(the fake model API's script has no turn for this request)"


@dataclass(frozen=True)
class Choice:
    """The turn chosen for a request: `index` in the script, or None for `when_exhausted`."""

    index: int | None
    turn: Answer


class Script:
    """Turns handed out in order (thread-safe). `Script([tools(Shell("ls")), text("done")])`."""

    def __init__(self, turns: Sequence[Answer], *, when_exhausted: Answer | None = None) -> None:
        self.turns: tuple[Answer, ...] = tuple(turns)
        self.when_exhausted = when_exhausted if when_exhausted is not None else _exhausted()
        self._used = [0] * len(self.turns)
        self._lock = threading.Lock()
        self.unmatched: list[int] = []  # numbers of the requests no turn accepted

    def choose(self, request: RecordedRequest) -> Choice:
        with self._lock:
            for index, turn in enumerate(self.turns):
                if self._used[index] < turn.times and turn.accepts(request):
                    self._used[index] += 1
                    return Choice(index, turn)
            self.unmatched.append(request.number)
            return Choice(None, self.when_exhausted)

    def extend(self, turns: Sequence[Answer]) -> None:
        """Add turns at the end (a test scripting the next part once it knows more)."""
        with self._lock:
            self.turns += tuple(turns)
            self._used += [0] * len(turns)

    @property
    def pending(self) -> int:
        """How many answers the script still has to give."""
        with self._lock:
            return sum(turn.times - used for turn, used in zip(self.turns, self._used, strict=True))

    @property
    def done(self) -> bool:
        return self.pending == 0


def _exhausted() -> Text:
    return Text(text=EXHAUSTED_TEXT, label="exhausted")


# --- predicates ---


def after_tool_result(request: RecordedRequest) -> bool:
    """The last thing the client sent is a tool's result."""
    return bool(request.last_tool_results())


def carries(text: str) -> Predicate:
    """The conversation (prompt, messages, tool results) holds `text`."""

    def predicate(request: RecordedRequest) -> bool:
        return text in request.text()

    return predicate


def session(session_id: str) -> Predicate:
    def predicate(request: RecordedRequest) -> bool:
        return request.session_id == session_id

    return predicate
